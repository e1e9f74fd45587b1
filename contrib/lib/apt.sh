# shellcheck shell=bash
# Sourced by contrib/stack13.sh and contrib/ompi_headers.sh: the Debian archive
# this machine's apt already uses, read from its configuration at run time (so
# no archive is named in the repository).

# debian_mirror: prints the URI of the first enabled "deb" source whose suites
# include this machine's own release (security archives carry other suites);
# DUALRAIL_DEBIAN_MIRROR wins. Returns 1 when none is found.
debian_mirror() {
  if [[ -n ${DUALRAIL_DEBIAN_MIRROR:-} ]]; then
    echo "$DUALRAIL_DEBIAN_MIRROR"
    return 0
  fi
  local codename f m
  local -a files=()
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [[ -n $codename ]] || return 1
  for f in /etc/apt/sources.list.d/*.sources; do [[ -f $f ]] && files+=("$f"); done
  if ((${#files[@]})); then
    # deb822: stanzas separated by blank lines
    m=$(awk -v want="$codename" '
      function flush() {
        if (!found && types ~ /(^| )deb( |$)/ && enabled != "no" &&
            (" " suites " ") ~ (" " want " ") && uri != "") { print uri; found = 1 }
        types = ""; suites = ""; uri = ""; enabled = ""
      }
      /^[ \t]*$/ { flush(); next }
      /^#/ { next }
      tolower($1) == "types:" { $1 = ""; types = $0 }
      tolower($1) == "suites:" { $1 = ""; suites = $0 }
      tolower($1) == "uris:" { uri = $2 }
      tolower($1) == "enabled:" { enabled = tolower($2) }
      END { flush() }' "${files[@]}")
  fi
  if [[ -z ${m:-} ]]; then
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [[ -f $f ]] || continue
      m=$(awk -v want="$codename" '$1 == "deb" {
            i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
            if ($(i + 1) == want) { print $i; exit } }' "$f")
      [[ -n $m ]] && break
    done
  fi
  [[ -n ${m:-} ]] || return 1
  echo "${m%/}"
}
