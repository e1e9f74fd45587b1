/* Type sizes and names of the memory interface (dr_gpu.h); no CUDA here. */
#include "gpu/dr_gpu.h"

static const size_t type_sizes[DR_GPU_TYPE_COUNT] = {4, 8, 2, 2, 1, 2, 4, 8, 1, 2, 4, 8};
static const char *const type_names[DR_GPU_TYPE_COUNT] = {
    "f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"};
static const char *const op_names[DR_GPU_OP_COUNT] = {"sum", "prod", "min",  "max", "band",
                                                      "bor", "bxor", "land", "lor", "lxor"};

size_t dr_gpu_type_size(int type)
{
    return type >= 0 && type < DR_GPU_TYPE_COUNT ? type_sizes[type] : 0;
}

const char *dr_gpu_type_name(int type)
{
    return type >= 0 && type < DR_GPU_TYPE_COUNT ? type_names[type] : "?";
}

const char *dr_gpu_op_name(int op)
{
    return op >= 0 && op < DR_GPU_OP_COUNT ? op_names[op] : "?";
}

int dr_gpu_op_valid(int op, int type)
{
    if (op < 0 || op >= DR_GPU_OP_COUNT || type < 0 || type >= DR_GPU_TYPE_COUNT) {
        return 0;
    }
    const int floating = type <= DR_GPU_BF16;
    return !floating || op <= DR_GPU_MAX;
}
