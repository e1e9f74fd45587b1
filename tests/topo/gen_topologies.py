#!/usr/bin/env python3
"""Write the hwloc 2.x XML topologies used by the topology tests.

The machines are modelled on real ones (PCI ids, bus layouts and info
attributes as hwloc 2.9's Linux backend reports them); run from this folder:

    ./gen_topologies.py && for f in *.xml; do lstopo-no-graphics --input $f >/dev/null; done

dgx-2s8g8n.xml      DGX/HGX-like: 2 sockets x 16 cores x 2 threads, 8 GPUs and
                    8 InfiniBand NICs in 4 PCIe switch complexes (2 per
                    socket).  Complex c holds GPUs 2c and 2c+1 and NICs
                    mlx5_2c (plane A) and mlx5_2c+1 (plane B), each GPU on a
                    leaf switch with one of them.  Planes are told apart by
                    the IB subnet prefix (fec0:0:0:a / fec0:0:0:b).  Plus an
                    onboard 1 GbE management port (eno1) and an NVMe disk.
1s2n.xml            1 socket x 8 cores x 2 threads, one GPU, two RoCE NICs
                    (ConnectX-6 Dx, mlx5_0/ens1f0np0, mlx5_1/ens2f0np0) on two
                    host bridges, and eno1.
2s4n-skew.xml       2 sockets x 8 cores x 2 threads, 4 GPUs, 4 RoCE NICs; both
                    plane-A NICs (mlx5_0, mlx5_1) are on socket 0, plane B has
                    one NIC per socket (mlx5_2 on socket 0, mlx5_3 on socket 1).
"""
import itertools
import os
import sys
from xml.sax.saxutils import quoteattr


def bitmap(bits):
    """hwloc's bitmap text: 32-bit words, most significant first."""
    v = 0
    for b in bits:
        v |= 1 << b
    words = []
    while True:
        words.append(v & 0xFFFFFFFF)
        v >>= 32
        if v == 0:
            break
    return ",".join("0x%08x" % w for w in reversed(words))


class Gen:
    def __init__(self):
        self.gp = itertools.count(1)
        self.lines = []

    def out(self, depth, text):
        self.lines.append("  " * depth + text)

    def attrs(self, **kw):
        return " ".join("%s=%s" % (k, quoteattr(str(v))) for k, v in kw.items())

    def info(self, depth, name, value):
        self.out(depth, "<info name=%s value=%s/>" % (quoteattr(name), quoteattr(value)))


class Machine:
    """packages: list of (pus_by_core, numa_os, io) where io is a list of host bridges."""

    def __init__(self, name, packages, infos):
        self.name = name
        self.packages = packages
        self.infos = infos

    def write(self, path):
        g = Gen()
        g.lines += ['<?xml version="1.0" encoding="UTF-8"?>',
                    '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
                    '<topology version="2.0">']
        allpus = [pu for pk in self.packages for core in pk["cores"] for pu in core]
        allnodes = [pk["numa"] for pk in self.packages]
        cs, ns = bitmap(allpus), bitmap(allnodes)
        g.out(1, "<object %s>" % g.attrs(type="Machine", os_index=0, cpuset=cs, complete_cpuset=cs,
                                           allowed_cpuset=cs, nodeset=ns, complete_nodeset=ns,
                                           allowed_nodeset=ns, gp_index=next(g.gp)))
        for k, v in self.infos:
            g.info(2, k, v)
        for p, pk in enumerate(self.packages):
            pus = [pu for core in pk["cores"] for pu in core]
            pcs, pns = bitmap(pus), bitmap([pk["numa"]])
            g.out(2, "<object %s>" % g.attrs(type="Package", os_index=p, cpuset=pcs,
                                               complete_cpuset=pcs, nodeset=pns,
                                               complete_nodeset=pns, gp_index=next(g.gp)))
            g.info(3, "CPUVendor", pk["vendor"])
            g.info(3, "CPUModel", pk["model"])
            g.out(3, "<object %s>" % g.attrs(type="NUMANode", os_index=pk["numa"], cpuset=pcs,
                                               complete_cpuset=pcs, nodeset=pns,
                                               complete_nodeset=pns, gp_index=next(g.gp),
                                               local_memory=pk["memory"]))
            g.out(4, '<page_type size="4096" count="%d"/>' % (pk["memory"] // 4096))
            g.out(4, '<page_type size="2097152" count="0"/>')
            g.out(3, "</object>")
            l3 = bitmap(pus)
            g.out(3, "<object %s>" % g.attrs(type="L3Cache", cpuset=l3, complete_cpuset=l3,
                                               nodeset=pns, complete_nodeset=pns,
                                               gp_index=next(g.gp), cache_size=pk["l3"], depth=3,
                                               cache_linesize=64, cache_associativity=16,
                                               cache_type=0))
            for c, core in enumerate(pk["cores"]):
                ccs = bitmap(core)
                g.out(4, "<object %s>" % g.attrs(type="Core", os_index=c, cpuset=ccs,
                                                   complete_cpuset=ccs, nodeset=pns,
                                                   complete_nodeset=pns, gp_index=next(g.gp)))
                for pu in core:
                    b = bitmap([pu])
                    g.out(5, "<object %s/>" % g.attrs(type="PU", os_index=pu, cpuset=b,
                                                        complete_cpuset=b, nodeset=pns,
                                                        complete_nodeset=pns,
                                                        gp_index=next(g.gp)))
                g.out(4, "</object>")
            g.out(3, "</object>")
            for hb in pk["io"]:
                write_io(g, 3, hb, 0)
            g.out(2, "</object>")
        g.out(1, "</object>")
        g.lines.append("</topology>")
        with open(path, "w") as f:
            f.write("\n".join(g.lines) + "\n")


def write_io(g, depth, node, bdepth):
    kind = node["kind"]
    if kind == "hostbridge":
        g.out(depth, "<object %s>" % g.attrs(type="Bridge", gp_index=next(g.gp), bridge_type="0-1",
                                               depth=0, bridge_pci="0000:[%02x-%02x]" % node["buses"]))
        for ch in node["children"]:
            write_io(g, depth + 1, ch, 1)
        g.out(depth, "</object>")
    elif kind == "bridge":
        g.out(depth, "<object %s>" % g.attrs(
            type="Bridge", gp_index=next(g.gp), bridge_type="1-1", depth=bdepth,
            bridge_pci="0000:[%02x-%02x]" % node["buses"], pci_busid=node["busid"],
            pci_type="0604 [%s] [%s] %s" % (node["id"], node.get("sub", "0000:0000"), node.get("rev", "00")),
            pci_link_speed=node.get("speed", "31.507692")))
        g.info(depth + 1, "PCIVendor", node["vendor"])
        if "device" in node:
            g.info(depth + 1, "PCIDevice", node["device"])
        for ch in node["children"]:
            write_io(g, depth + 1, ch, bdepth + 1)
        g.out(depth, "</object>")
    else:
        g.out(depth, "<object %s>" % g.attrs(
            type="PCIDev", gp_index=next(g.gp), pci_busid=node["busid"],
            pci_type="%s [%s] [%s] %s" % (node["class"], node["id"], node["sub"], node.get("rev", "00")),
            pci_link_speed=node.get("speed", "31.507692")))
        g.info(depth + 1, "PCIVendor", node["vendor"])
        g.info(depth + 1, "PCIDevice", node["device"])
        for osd in node.get("osdevs", []):
            attrs = dict(type="OSDev", gp_index=next(g.gp), name=osd["name"])
            if "subtype" in osd:
                attrs["subtype"] = osd["subtype"]
            attrs["osdev_type"] = osd["type"]
            infos = osd.get("infos", [])
            if infos:
                g.out(depth + 1, "<object %s>" % g.attrs(**attrs))
                for k, v in infos:
                    g.info(depth + 2, k, v)
                g.out(depth + 1, "</object>")
            else:
                g.out(depth + 1, "<object %s/>" % g.attrs(**attrs))
        g.out(depth, "</object>")


# --------------------------------------------------------------- building blocks

OS_BLOCK, OS_GPU, OS_NET, OS_OFED = 0, 1, 2, 3  # hwloc_obj_osdev_type_e


def cores(package, ncores, npackages):
    """Linux numbering: first threads of all cores of all packages, then the siblings."""
    total = ncores * npackages
    return [[package * ncores + c, total + package * ncores + c] for c in range(ncores)]


def bridge(busid, buses, children, vendor="Broadcom / LSI", dev_id="1000:c030", device="PEX890xx PCIe Gen 5 Switch"):
    return dict(kind="bridge", busid=busid, buses=buses, children=children, vendor=vendor,
                id=dev_id, device=device)


def root_port(busid, buses, children, dev_id="8086:352a"):
    return dict(kind="bridge", busid=busid, buses=buses, children=children,
                vendor="Intel Corporation", id=dev_id, device="PCI Express Root Port")


def gpu(busid, model="GH100 [H100 SXM5 80GB]", dev_id="10de:2330", sub="10de:16c1"):
    return dict(kind="pci", busid=busid, **{"class": "0302"}, id=dev_id, sub=sub, rev="a1",
                vendor="NVIDIA Corporation", device=model)


def ib_nic(busid, index, prefix):
    bus = int(busid.split(":")[1], 16)
    guid = "a088:c203:00%02x:%02x%02x" % (index, bus, index * 7)
    gid = "%s:%s" % (prefix, guid)
    ipoib = "00:00:10:29:fe:80:00:00:00:00:00:00:a0:88:c2:03:00:%02x:%02x:%02x" % (index, bus, index * 7)
    return dict(kind="pci", busid=busid, **{"class": "0207"}, id="15b3:1021", sub="15b3:0041",
                vendor="Mellanox Technologies", device="MT2910 Family [ConnectX-7]",
                osdevs=[dict(name="ibp%ds0" % bus, type=OS_NET, infos=[("Address", ipoib)]),
                        dict(name="mlx5_%d" % index, type=OS_OFED,
                             infos=[("NodeGUID", guid), ("SysImageGUID", guid),
                                    ("Port1State", "4"), ("Port1LID", "0x%x" % (0x10 + index)),
                                    ("Port1LMC", "0"), ("Port1GID0", gid)])])


def roce_nic(busid, index, netdev, mac):
    gid = "fe80:0000:0000:0000:%s" % mac_to_eui64(mac)
    return dict(kind="pci", busid=busid, **{"class": "0200"}, id="15b3:101d", sub="15b3:0016",
                vendor="Mellanox Technologies", device="MT2892 Family [ConnectX-6 Dx]",
                osdevs=[dict(name=netdev, type=OS_NET, infos=[("Address", mac)]),
                        dict(name="mlx5_%d" % index, type=OS_OFED,
                             infos=[("NodeGUID", mac_to_eui64(mac)),
                                    ("SysImageGUID", mac_to_eui64(mac)),
                                    ("Port1State", "4"), ("Port1LID", "0x0"),
                                    ("Port1LMC", "0"), ("Port1GID0", gid)])])


def mac_to_eui64(mac):
    b = [int(x, 16) for x in mac.split(":")]
    b[0] ^= 2
    e = b[:3] + [0xFF, 0xFE] + b[3:]
    return ":".join("%02x%02x" % (e[i], e[i + 1]) for i in range(0, 8, 2))


def eno1(busid, mac):
    return dict(kind="pci", busid=busid, **{"class": "0200"}, id="8086:1533", sub="15d9:1533",
                rev="03", vendor="Intel Corporation", device="I210 Gigabit Network Connection",
                speed="0.250000",
                osdevs=[dict(name="eno1", type=OS_NET, infos=[("Address", mac)])])


def nvme(busid, name):
    return dict(kind="pci", busid=busid, **{"class": "0108"}, id="144d:a80a", sub="144d:a801",
                vendor="Samsung Electronics Co Ltd", device="NVMe SSD Controller PM9A1/PM9A3/980PRO",
                speed="7.876923",
                osdevs=[dict(name=name, subtype="Disk", type=OS_BLOCK,
                             infos=[("Size", "3750738264"), ("SectorSize", "512")])])


def bmc_vga(busid):
    return dict(kind="pci", busid=busid, **{"class": "0300"}, id="1a03:2000", sub="15d9:1c48",
                rev="52", vendor="ASPEED Technology, Inc.", device="ASPEED Graphics Family",
                speed="0.250000")


# --------------------------------------------------------------- machines

def dgx():
    """Complex c (root bus R): root port R:01.0 -> switch (R+1) -> downstream ports on
    bus R+2 -> two leaf switches, each with one GPU and one NIC."""
    prefixes = {"a": "fec0:0000:0000:000a", "b": "fec0:0000:0000:000b"}
    roots = [0x10, 0x30, 0x90, 0xB0]
    complexes = []
    for c, r in enumerate(roots):
        leaves = []
        for k, plane in enumerate("ab"):
            up = r + 3 + 4 * k          # leaf switch upstream port bus
            g = gpu("0000:%02x:00.0" % (up + 2))
            n = ib_nic("0000:%02x:00.0" % (up + 3), 2 * c + k, prefixes[plane])
            leaves.append(bridge("0000:%02x:%02x.0" % (r + 2, k), (up, up + 3), [
                bridge("0000:%02x:00.0" % up, (up + 1, up + 3), [
                    bridge("0000:%02x:00.0" % (up + 1), (up + 2, up + 2), [g]),
                    bridge("0000:%02x:01.0" % (up + 1), (up + 3, up + 3), [n]),
                ]),
            ]))
        complexes.append(dict(kind="hostbridge", buses=(r, r + 0x1F), children=[
            root_port("0000:%02x:01.0" % r, (r + 1, r + 0x0F), [
                bridge("0000:%02x:00.0" % (r + 1), (r + 2, r + 0x0F), leaves),
            ]),
        ]))
    chipset = dict(kind="hostbridge", buses=(0x00, 0x0F), children=[
        root_port("0000:00:1b.0", (0x01, 0x01), [nvme("0000:01:00.0", "nvme0n1")], "8086:a1e8"),
        root_port("0000:00:1c.0", (0x02, 0x02), [eno1("0000:02:00.0", "3c:ec:ef:10:20:31")], "8086:a190"),
        root_port("0000:00:1d.0", (0x03, 0x04), [bmc_vga("0000:04:00.0")], "8086:a198"),
    ])
    pk = lambda p, io: dict(cores=cores(p, 16, 2), numa=p, memory=1 << 40, l3=105 << 20,
                            vendor="GenuineIntel",
                            model="Intel(R) Xeon(R) Platinum 8480C", io=io)
    return Machine("dgx", [pk(0, [chipset] + complexes[:2]), pk(1, complexes[2:])],
                   [("DMIProductName", "DGX-like 8-GPU dual-plane reference"),
                    ("DMIBoardVendor", "DualRail tests"), ("Backend", "Linux"),
                    ("OSName", "Linux"), ("Architecture", "x86_64"),
                    ("HostName", "dgx-ref")])


def one_socket():
    io = [
        dict(kind="hostbridge", buses=(0x00, 0x0F), children=[
            root_port("0000:00:1c.0", (0x02, 0x02), [eno1("0000:02:00.0", "3c:ec:ef:20:30:41")], "8086:a190"),
        ]),
        dict(kind="hostbridge", buses=(0x40, 0x4F), children=[
            root_port("0000:40:01.1", (0x41, 0x41), [roce_nic("0000:41:00.0", 0, "ens1f0np0", "b8:3f:d2:00:41:00")], "1022:1483"),
        ]),
        dict(kind="hostbridge", buses=(0x80, 0x8F), children=[
            root_port("0000:80:01.1", (0x81, 0x81), [gpu("0000:81:00.0", "AD102GL [L40S]", "10de:26b9", "10de:1851")], "1022:1483"),
        ]),
        dict(kind="hostbridge", buses=(0xC0, 0xCF), children=[
            root_port("0000:c0:01.1", (0xC1, 0xC1), [roce_nic("0000:c1:00.0", 1, "ens2f0np0", "b8:3f:d2:00:c1:00")], "1022:1483"),
        ]),
    ]
    pk = dict(cores=cores(0, 8, 1), numa=0, memory=256 << 30, l3=32 << 20,
              vendor="AuthenticAMD", model="AMD EPYC 9124 16-Core Processor", io=io)
    return Machine("1s2n", [pk], [("DMIProductName", "1-socket 2-NIC reference"),
                                  ("DMIBoardVendor", "DualRail tests"), ("Backend", "Linux"),
                                  ("OSName", "Linux"), ("Architecture", "x86_64"),
                                  ("HostName", "box1s")])


def skew():
    s0 = [
        dict(kind="hostbridge", buses=(0x00, 0x1F), children=[
            root_port("0000:00:1c.0", (0x02, 0x02), [eno1("0000:02:00.0", "3c:ec:ef:30:40:51")], "8086:a190"),
            root_port("0000:00:03.0", (0x05, 0x05), [roce_nic("0000:05:00.0", 0, "ens3f0np0", "b8:3f:d2:01:05:00")], "8086:352a"),
        ]),
        dict(kind="hostbridge", buses=(0x20, 0x3F), children=[
            root_port("0000:20:01.0", (0x21, 0x2F), [
                bridge("0000:21:00.0", (0x22, 0x2F), [
                    bridge("0000:22:00.0", (0x23, 0x23), [gpu("0000:23:00.0")]),
                    bridge("0000:22:01.0", (0x24, 0x24), [roce_nic("0000:24:00.0", 1, "ens5f0np0", "b8:3f:d2:01:24:00")]),
                    bridge("0000:22:02.0", (0x25, 0x25), [roce_nic("0000:25:00.0", 2, "ens6f0np0", "b8:3f:d2:01:25:00")]),
                ]),
            ]),
        ]),
        dict(kind="hostbridge", buses=(0x40, 0x5F), children=[
            root_port("0000:40:01.0", (0x41, 0x41), [gpu("0000:41:00.0")]),
        ]),
    ]
    s1 = [
        dict(kind="hostbridge", buses=(0x80, 0x9F), children=[
            root_port("0000:80:01.0", (0x81, 0x81), [gpu("0000:81:00.0")]),
        ]),
        dict(kind="hostbridge", buses=(0xA0, 0xBF), children=[
            root_port("0000:a0:01.0", (0xA1, 0xAF), [
                bridge("0000:a1:00.0", (0xA2, 0xAF), [
                    bridge("0000:a2:00.0", (0xA3, 0xA3), [gpu("0000:a3:00.0")]),
                    bridge("0000:a2:01.0", (0xA4, 0xA4), [roce_nic("0000:a4:00.0", 3, "ens7f0np0", "b8:3f:d2:01:a4:00")]),
                ]),
            ]),
        ]),
    ]
    pk = lambda p, io: dict(cores=cores(p, 8, 2), numa=p, memory=512 << 30, l3=60 << 20,
                            vendor="GenuineIntel", model="Intel(R) Xeon(R) Gold 6434", io=io)
    return Machine("skew", [pk(0, s0), pk(1, s1)],
                   [("DMIProductName", "2-socket, plane A all on socket 0"),
                    ("DMIBoardVendor", "DualRail tests"), ("Backend", "Linux"),
                    ("OSName", "Linux"), ("Architecture", "x86_64"), ("HostName", "skew")])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else here
    for name, m in (("dgx-2s8g8n.xml", dgx()), ("1s2n.xml", one_socket()),
                    ("2s4n-skew.xml", skew())):
        m.write(os.path.join(out, name))
        print("wrote", os.path.join(out, name))


if __name__ == "__main__":
    main()
