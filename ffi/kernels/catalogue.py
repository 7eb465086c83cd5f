"""The kernel catalogue: every kernel the build compiles, one line each.

Each line is a kernel: its name (the entry's symbol, and what the handler's
log prints), its kind (how it is instantiated and which family the choice
function searches it in), the tile it serves, its dtypes, the layout it is built for, its
configuration struct and why it exists.  Lines are grouped into
translation units (UNITS): nvcc spends most of a unit's time parsing the
CUTLASS headers, not on one kernel, so the kernels of one header and tile
compile together, and the units compile in parallel.

Adding a kernel is one line here (and, for a new tile, its configuration
struct in the family's header).  CMake runs this file at configure time
(CMakeLists.txt):

  python ffi/kernels/catalogue.py OUT_DIR

and it writes, under OUT_DIR: kernels/<unit>.cu (one instantiation unit
per UNITS entry); kernels/catalogue_table.h (the table as constexpr plain
C++, which the planner and the choice function search in every build:
kernels/catalogue.h); kernels/catalogue_entries.h (the entries'
declarations, and the entry each line has in this build: the registry);
kernels/catalogue_build_info.h (the kernels as BuildInfo lists them); and
catalogue.cmake (the units' source lists: ffi/cuda.cmake).  A file whose
text is unchanged is left alone, so a reconfigure rebuilds no unit.
"""

import collections
import os
import sys

# --- The kinds of kernel ------------------------------------------------------
#
# A kind says how a line is instantiated (the macro of its family's header
# and that macro's arguments) and its family (KernelFamily,
# kernels/catalogue.h: the entry type, which tile enum).

# dtype -> (CUTLASS element type, CUDA element type, C++ DType).
DTYPES = {
    "f32": ("float", "float", "DType::kF32"),
    "bf16": ("cutlass::bfloat16_t", "__nv_bfloat16", "DType::kBF16"),
    "f16": ("cutlass::half_t", "__half", "DType::kF16"),
}
# A layout's letter for A or B -> its CUTLASS layout: N (not transposed) is
# row-major (A m x k, B k x n), T (transposed) column-major.
CUTLASS_LAYOUT = {"N": "cutlass::layout::RowMajor",
                  "T": "cutlass::layout::ColumnMajor"}
LAYOUTS = ("NN", "NT", "TN", "TT")

# family -> (KernelFamily enumerator, tile enum or None, {tile: enumerator}).
# The tiles are named as jax_dynoff/options.py names them.
SM90_TILES = {"large": "kLarge", "medium": "kMedium", "small_m": "kSmallM",
              "tiny": "kTiny"}
FAMILIES = {
    "generic": ("kGeneric", None, {}),
    "tf32": ("kTf32", None, {}),
    "sm90": ("kSm90", "Sm90Tile", SM90_TILES),
    "sm90_tf32_highest": ("kSm90Tf32Highest", "Sm90Tile", SM90_TILES),
    "sm90_split_k": ("kSm90SplitK", None, {}),
    "sm90_direct": ("kSm90Direct", "DirectTile", {
        "large": "kLarge", "wide": "kWide", "medium": "kMedium",
        "small_m": "kSmall", "tiny": "kTiny", "split_k": "kSplitK",
        "cluster_k": "kClusterK"}),
    "sm90_grouped": ("kSm90Grouped", "GroupedTile", {
        "medium": "kMedium", "wide": "kWide",
        "small_groups": "kSmallGroups"}),
    "sm90_grouped_swiglu": ("kSm90GroupedSwiglu", "GroupedTile", {
        "medium": "kMedium", "wide": "kWide",
        "small_groups": "kSmallGroups"}),
    "sm90_skinny": ("kSm90Skinny", "SkinnyTile", {
        "wide": "kWide", "narrow": "kNarrow"}),
}


def _cutlass(dtype):
  return DTYPES[dtype][0]


def _layouts(k):
  return [CUTLASS_LAYOUT[k.layout[0]], CUTLASS_LAYOUT[k.layout[1]]]


def _bool(x):
  return "true" if x else "false"


Kind = collections.namedtuple("Kind", [
    "family",      # FAMILIES key: its KernelFamily
    "entry",       # its entry type (kernels/launch.h)
    "macro",       # kernel -> (macro, arguments after the name)
    "dtypes",      # the "in->out" pairs its macro can instantiate
    "layouts",     # the layouts its macro can instantiate
    "config",      # whether a line names a configuration
    "any_layout",  # serves every transpose, whatever layout it is built for
    "config_unit",  # what the configuration counts, where it is a number
], defaults=("",))

ANY_PAIR = tuple(f"{i}->{o}" for i in DTYPES for o in DTYPES)
SAME = tuple(f"{d}->{d}" for d in DTYPES)  # the macro takes one element type
F32 = ("f32->f32",)

KINDS = {
    # CUTLASS 2.x SIMT (kernels/generic_gemm.h): AffineRank2 A and B, both
    # strides at run time, so one kernel per dtype pair serves every layout.
    "generic": Kind(
        "generic", "KernelEntry", lambda k: (
            "JAX_DYNOFF_GENERIC_KERNEL",
            [_cutlass(k.dtype_in), _cutlass(k.dtype_out)]),
        dtypes=ANY_PAIR, layouts=("any",), config=False, any_layout=True),
    # CUTLASS 2.x tensor-op TF32 (kernels/tf32_gemm.h), one per layout.
    "tf32": Kind(
        "tf32", "KernelEntry", lambda k: ("JAX_DYNOFF_TF32_KERNEL", _layouts(k)),
        dtypes=F32, layouts=LAYOUTS, config=False, any_layout=False),
    # CUTLASS 3.x ptr-array (kernels/sm90_gemm.h), one per layout.
    "sm90": Kind(
        "sm90", "KernelEntry", lambda k: (
            "JAX_DYNOFF_SM90_KERNEL",
            [k.config, _cutlass(k.dtype_in), _cutlass(k.dtype_out)] + _layouts(k)),
        dtypes=ANY_PAIR, layouts=LAYOUTS, config=True, any_layout=False),
    # The same for float32 (kernels/sm90_tf32_gemm.h): built K-major only
    # (NT), it serves every layout because the runner stages an MN-major
    # operand K-major first (kernels/sm90_tf32.h says why).
    "sm90_tf32": Kind(
        "sm90", "KernelEntry", lambda k: (
            "JAX_DYNOFF_SM90_KERNEL",
            [k.config, _cutlass(k.dtype_in), _cutlass(k.dtype_out)] + _layouts(k)),
        dtypes=F32, layouts=("NT",), config=True, any_layout=True),
    # 3xTF32 with promoted accumulators (kernels/sm90_tf32_gemm.h): NT,
    # staged like sm90_tf32.
    "sm90_tf32_promoted": Kind(
        "sm90_tf32_highest", "KernelEntry", lambda k: (
            "JAX_DYNOFF_SM90_TF32_PROMOTED_KERNEL", [k.config]),
        dtypes=F32, layouts=("NT",), config=True, any_layout=True),
    # Split-K slices (kernels/sm90_gemm.h): Sm90SplitKConfig, float32
    # partials, no C.
    "sm90_split_k": Kind(
        "sm90_split_k", "KernelEntry", lambda k: (
            "JAX_DYNOFF_SM90_SPLITK_KERNEL",
            [_cutlass(k.dtype_in)] + _layouts(k)),
        dtypes=tuple(f"{d}->f32" for d in DTYPES), layouts=LAYOUTS,
        config=False, any_layout=False),
    # Direct kernels (kernels/sm90_direct.h).
    "sm90_direct": Kind(
        "sm90_direct", "DirectKernelEntry", lambda k: (
            ("JAX_DYNOFF_SM90_DIRECT_KERNEL",
             [k.config, _cutlass(k.dtype_in), _cutlass(k.dtype_out)])
            if k.layout == "NN" else
            ("JAX_DYNOFF_SM90_DIRECT_KERNEL_T",
             [k.config, _cutlass(k.dtype_in), _cutlass(k.dtype_out),
              _bool(k.layout[0] == "T"), _bool(k.layout[1] == "T")])),
        dtypes=SAME + ("bf16->f32", "f16->f32"), layouts=LAYOUTS, config=True,
        any_layout=False),
    # Direct TF32 kernels for float32 NN (kernels/sm90_direct_tf32.h).
    "sm90_direct_tf32": Kind(
        "sm90_direct", "DirectKernelEntry", lambda k: (
            "JAX_DYNOFF_SM90_DIRECT_TF32_KERNEL", [k.config]),
        dtypes=F32, layouts=("NN",), config=True, any_layout=False),
    # The cluster-K direct tile (kernels/sm90_cluster_k.h).
    "sm90_cluster_k": Kind(
        "sm90_direct", "DirectKernelEntry", lambda k: (
            "JAX_DYNOFF_SM90_CLUSTER_K_KERNEL", [_cutlass(k.dtype_in)]),
        dtypes=SAME, layouts=("NN",), config=False, any_layout=False),
    # Grouped kernels (kernels/sm90_grouped.h).
    "sm90_grouped": Kind(
        "sm90_grouped", "GroupedKernelEntry", lambda k: (
            "JAX_DYNOFF_SM90_GROUPED_KERNEL_TILE",
            [k.config, _cutlass(k.dtype_in), _cutlass(k.dtype_out)] +
            _layouts(k)),
        dtypes=SAME + ("bf16->f32", "f16->f32"), layouts=LAYOUTS, config=True,
        any_layout=False),
    # Grouped kernels with the swiglu epilogue fused (kernels/sm90_grouped.h,
    # Sm90GluEpilogueArray): A and B row-major, D of the input's dtype.
    "sm90_grouped_swiglu": Kind(
        "sm90_grouped_swiglu", "GroupedKernelEntry", lambda k: (
            "JAX_DYNOFF_SM90_GROUPED_SWIGLU_KERNEL",
            [k.config, _cutlass(k.dtype_in), _cutlass(k.dtype_out)]),
        dtypes=("bf16->bf16", "f16->f16"), layouts=("NN",), config=True,
        any_layout=False),
    # The small-group weight-gradient kernel (kernels/small_group_grad.h):
    # a grouped launch of its own, A transposed (a contraction over each
    # item's rows), the grouped tile small_groups; D of the input's dtype
    # or float32.
    "sm90_small_group_grad": Kind(
        "sm90_grouped", "GroupedKernelEntry", lambda k: (
            "JAX_DYNOFF_SM90_SMALL_GROUP_GRAD_KERNEL",
            [DTYPES[k.dtype_in][1], DTYPES[k.dtype_out][1]]),
        dtypes=("bf16->bf16", "f16->f16", "bf16->f32", "f16->f32"),
        layouts=("TN",), config=False, any_layout=False),
    # The small-group forward kernel (kernels/small_group_fwd.h): a grouped
    # launch of its own, A not transposed (x @ W[e], NN, and x @ W[e]^T,
    # NT), the grouped tile small_groups; D of the input's dtype or float32.
    "sm90_small_group_fwd": Kind(
        "sm90_grouped", "GroupedKernelEntry", lambda k: (
            "JAX_DYNOFF_SM90_SMALL_GROUP_FWD_KERNEL",
            [DTYPES[k.dtype_in][1], DTYPES[k.dtype_out][1],
             _bool(k.layout[1] == "T")]),
        dtypes=("bf16->bf16", "f16->f16", "bf16->f32", "f16->f32"),
        layouts=("NN", "NT"), config=False, any_layout=False),
    # The same with the swiglu epilogue (ragged_dot(activation="swiglu")):
    # NN, D of the input's dtype.
    "sm90_small_group_fwd_swiglu": Kind(
        "sm90_grouped_swiglu", "GroupedKernelEntry", lambda k: (
            "JAX_DYNOFF_SM90_SMALL_GROUP_FWD_SWIGLU_KERNEL",
            [DTYPES[k.dtype_in][1], DTYPES[k.dtype_out][1]]),
        dtypes=("bf16->bf16", "f16->f16"), layouts=("NN",), config=False,
        any_layout=False),
    # Skinny kernels (kernels/sm90_skinny.h), A not transposed; the
    # configuration is the m16 fragments a CTA covers (max m = 16 x it).
    "sm90_skinny": Kind(
        "sm90_skinny", "SkinnyKernelEntry", lambda k: (
            "JAX_DYNOFF_SM90_SKINNY_KERNEL",
            [DTYPES[k.dtype_in][1], DTYPES[k.dtype_out][1], k.config,
             _bool(k.layout[1] == "T")]),
        dtypes=SAME + ("bf16->f32", "f16->f32"), layouts=("NN", "NT"),
        config=True, any_layout=False,
        config_unit=" m16 fragment(s)"),
    # The skinny path's narrow tile (kernels/sm90_skinny_narrow.h): 16
    # columns a CTA over all of K, no cluster; m <= 16.
    "sm90_skinny_narrow": Kind(
        "sm90_skinny", "SkinnyKernelEntry", lambda k: (
            "JAX_DYNOFF_SM90_SKINNY_NARROW_KERNEL",
            [DTYPES[k.dtype_in][1], DTYPES[k.dtype_out][1],
             _bool(k.layout[1] == "T")]),
        dtypes=SAME + ("bf16->f32", "f16->f32"), layouts=("NN", "NT"),
        config=False, any_layout=False),
}

# --- The table ----------------------------------------------------------------
#
# A unit: its file name, the header whose macros it instantiates, where it
# is compiled (EVERY_ARCH: SASS for every JAX_DYNOFF_CUDA_ARCHS entry;
# SM90A: sm_90a only, and only when JAX_DYNOFF_CUDA_ARCHS lists 90a), the
# head comment of its file, and its kernels, one line each:
#   K(name, kind, tile, "in->out", layout, configuration, why)
# tile: the one its family's lookup finds it under ("large|medium": both;
# None: a family without tiles); layout: what A and B are built as (N: not
# transposed, T: transposed; "any": the kernel reads both strides at run
# time).  Names: k<family><tile><in>[<out>]<layout of A><layout of B>, the
# parts a family has.

EVERY_ARCH, SM90A = "every_arch", "sm90a"

Unit = collections.namedtuple("Unit", "name header arch about kernels")
K = collections.namedtuple(
    "K", "name kind tile dtypes layout config why")

UNITS = [
    Unit("generic", "kernels/generic_gemm.h", EVERY_ARCH,
         "Generic kernels: CUTLASS 2.x SIMT, kArray, alignment 1, any layout; "
         "every architecture.", [
    K("kGenericF32F32", "generic", None, "f32->f32", "any", None, "Serves f32 at every precision: SIMT products are full fp32 (no tf32)."),
    K("kGenericBf16Bf16", "generic", None, "bf16->bf16", "any", None, "Unaligned or transposed-both bf16 windows, and bf16 on GPUs other than sm_90."),
    K("kGenericBf16F32", "generic", None, "bf16->f32", "any", None, "bf16 inputs, f32 result: windows the SM90 kernels cannot read (unaligned, both operands transposed), GPUs other than sm_90."),
    K("kGenericF16F16", "generic", None, "f16->f16", "any", None, "Unaligned or transposed-both f16 windows, and f16 on GPUs other than sm_90."),
    K("kGenericF16F32", "generic", None, "f16->f32", "any", None, "f16 inputs, f32 result: windows the SM90 kernels cannot read (unaligned, both operands transposed), GPUs other than sm_90."),
    ]),
    Unit("tf32", "kernels/tf32_gemm.h", EVERY_ARCH,
         "TF32 kernels: CUTLASS 2.x tensor-op (mma.sync TF32), kArray, "
         "alignment 1, float32 in and out; sm_80 and newer.", [
    K("kTf32NN", "tf32", None, "f32->f32", "NN", None, "float32 x @ W at default precision."),
    K("kTf32NT", "tf32", None, "f32->f32", "NT", None, "float32 x @ W.T at default precision."),
    K("kTf32TN", "tf32", None, "f32->f32", "TN", None, "float32 x.T @ dy at default precision."),
    K("kTf32TT", "tf32", None, "f32->f32", "TT", None, "float32 a.T @ b.T at default precision."),
    ]),
    Unit("sm90_gemm_large", "kernels/sm90_gemm.h", SM90A,
         "SM90 ptr-array kernels (CUTLASS 3.x ptr-array TMA warp-specialized), "
         "the large tile.", [
    K("kSm90LargeBf16Bf16NN", "sm90", "large", "bf16->bf16", "NN", "Sm90LargeConfig", "bf16 x @ W, large m: the main workload (row slices of big buffers)."),
    K("kSm90LargeBf16Bf16NT", "sm90", "large", "bf16->bf16", "NT", "Sm90LargeConfig", "bf16 x @ W.T (transpose_b; also the input gradient dy @ W^T), large m."),
    K("kSm90LargeBf16Bf16TN", "sm90", "large", "bf16->bf16", "TN", "Sm90LargeConfig", "bf16 x.T @ dy (transpose_a: the weight gradient), large m."),
    K("kSm90LargeF16F16NN", "sm90", "large", "f16->f16", "NN", "Sm90LargeConfig", "f16 x @ W, large m."),
    K("kSm90LargeF16F16NT", "sm90", "large", "f16->f16", "NT", "Sm90LargeConfig", "f16 x @ W.T (transpose_b; the input gradient dy @ W^T), as bf16 has it."),
    K("kSm90LargeF16F16TN", "sm90", "large", "f16->f16", "TN", "Sm90LargeConfig", "f16 x.T @ dy (transpose_a: the weight gradient), as bf16 has it."),
    ]),
    Unit("sm90_gemm_medium", "kernels/sm90_gemm.h", SM90A,
         "SM90 ptr-array kernels (CUTLASS 3.x ptr-array TMA warp-specialized), "
         "the medium tile.", [
    K("kSm90MediumBf16Bf16NN", "sm90", "medium", "bf16->bf16", "NN", "Sm90MediumConfig", "bf16 x @ W, mid-size problems (128x128 tiles)."),
    K("kSm90MediumBf16Bf16NT", "sm90", "medium", "bf16->bf16", "NT", "Sm90MediumConfig", "bf16 x @ W.T (transpose_b), mid-size problems (128x128 tiles)."),
    K("kSm90MediumBf16Bf16TN", "sm90", "medium", "bf16->bf16", "TN", "Sm90MediumConfig", "bf16 x.T @ dy (transpose_a: the weight gradient), mid-size problems (128x128 tiles)."),
    K("kSm90MediumF16F16NN", "sm90", "medium", "f16->f16", "NN", "Sm90MediumConfig", "f16 x @ W, mid-size problems (128x128 tiles)."),
    K("kSm90MediumF16F16NT", "sm90", "medium", "f16->f16", "NT", "Sm90MediumConfig", "f16 x @ W.T (transpose_b; the input gradient dy @ W^T), as bf16 has it."),
    K("kSm90MediumF16F16TN", "sm90", "medium", "f16->f16", "TN", "Sm90MediumConfig", "f16 x.T @ dy (transpose_a: the weight gradient), as bf16 has it."),
    ]),
    Unit("sm90_gemm_small", "kernels/sm90_gemm.h", SM90A,
         "SM90 ptr-array kernels (CUTLASS 3.x ptr-array TMA warp-specialized), "
         "the small_m tile.", [
    K("kSm90SmallBf16Bf16NN", "sm90", "small_m", "bf16->bf16", "NN", "Sm90SmallConfig", "bf16 x @ W, m <= 256 or too few large tiles to fill the GPU (stacked layers)."),
    K("kSm90SmallBf16Bf16NT", "sm90", "small_m", "bf16->bf16", "NT", "Sm90SmallConfig", "bf16 x @ W.T (transpose_b), small m."),
    K("kSm90SmallBf16Bf16TN", "sm90", "small_m", "bf16->bf16", "TN", "Sm90SmallConfig", "bf16 x.T @ dy (transpose_a), small m."),
    K("kSm90SmallF16F16NN", "sm90", "small_m", "f16->f16", "NN", "Sm90SmallConfig", "f16 x @ W, small m."),
    K("kSm90SmallF16F16NT", "sm90", "small_m", "f16->f16", "NT", "Sm90SmallConfig", "f16 x @ W.T (transpose_b; the input gradient dy @ W^T), as bf16 has it."),
    K("kSm90SmallF16F16TN", "sm90", "small_m", "f16->f16", "TN", "Sm90SmallConfig", "f16 x.T @ dy (transpose_a: the weight gradient), as bf16 has it."),
    ]),
    Unit("sm90_gemm_tiny", "kernels/sm90_gemm.h", SM90A,
         "SM90 ptr-array kernels (CUTLASS 3.x ptr-array TMA warp-specialized), "
         "the tiny tile.", [
    K("kSm90TinyBf16Bf16NN", "sm90", "tiny", "bf16->bf16", "NN", "Sm90TinyConfig", "bf16 x @ W, very few tiles (64x64 tiles)."),
    K("kSm90TinyBf16Bf16NT", "sm90", "tiny", "bf16->bf16", "NT", "Sm90TinyConfig", "bf16 x @ W.T (transpose_b), very few tiles (64x64 tiles)."),
    K("kSm90TinyBf16Bf16TN", "sm90", "tiny", "bf16->bf16", "TN", "Sm90TinyConfig", "bf16 x.T @ dy (transpose_a: the weight gradient), very few tiles (64x64 tiles)."),
    K("kSm90TinyF16F16NN", "sm90", "tiny", "f16->f16", "NN", "Sm90TinyConfig", "f16 x @ W, very few tiles (64x64 tiles)."),
    K("kSm90TinyF16F16NT", "sm90", "tiny", "f16->f16", "NT", "Sm90TinyConfig", "f16 x @ W.T (transpose_b; the input gradient dy @ W^T), as bf16 has it."),
    K("kSm90TinyF16F16TN", "sm90", "tiny", "f16->f16", "TN", "Sm90TinyConfig", "f16 x.T @ dy (transpose_a: the weight gradient), as bf16 has it."),
    ]),
    Unit("sm90_gemm_f32_out_large", "kernels/sm90_gemm.h", SM90A,
         "SM90 ptr-array kernels (CUTLASS 3.x ptr-array TMA warp-specialized), "
         "the large tile, 16-bit inputs with a float32 output and C "
         "(preferred_element_type=float32).", [
    K("kSm90LargeBf16F32NN", "sm90", "large", "bf16->f32", "NN", "Sm90LargeConfig", "bf16 x @ W into a float32 result (preferred_element_type=float32)."),
    K("kSm90LargeBf16F32NT", "sm90", "large", "bf16->f32", "NT", "Sm90LargeConfig", "bf16 x @ W.T (transpose_b) into a float32 result."),
    K("kSm90LargeBf16F32TN", "sm90", "large", "bf16->f32", "TN", "Sm90LargeConfig", "bf16 x.T @ dy (transpose_a) into float32: a weight gradient kept in float32."),
    K("kSm90LargeF16F32NN", "sm90", "large", "f16->f32", "NN", "Sm90LargeConfig", "f16 x @ W into a float32 result (preferred_element_type=float32)."),
    K("kSm90LargeF16F32NT", "sm90", "large", "f16->f32", "NT", "Sm90LargeConfig", "f16 x @ W.T (transpose_b) into a float32 result."),
    K("kSm90LargeF16F32TN", "sm90", "large", "f16->f32", "TN", "Sm90LargeConfig", "f16 x.T @ dy (transpose_a) into float32: a weight gradient kept in float32."),
    ]),
    Unit("sm90_gemm_f32_out_medium", "kernels/sm90_gemm.h", SM90A,
         "SM90 ptr-array kernels (CUTLASS 3.x ptr-array TMA warp-specialized), "
         "the medium tile, 16-bit inputs with a float32 output and C "
         "(preferred_element_type=float32).", [
    K("kSm90MediumBf16F32NN", "sm90", "medium", "bf16->f32", "NN", "Sm90MediumConfig", "bf16 x @ W into a float32 result (preferred_element_type=float32)."),
    K("kSm90MediumBf16F32NT", "sm90", "medium", "bf16->f32", "NT", "Sm90MediumConfig", "bf16 x @ W.T (transpose_b) into a float32 result."),
    K("kSm90MediumBf16F32TN", "sm90", "medium", "bf16->f32", "TN", "Sm90MediumConfig", "bf16 x.T @ dy (transpose_a) into float32: a weight gradient kept in float32."),
    K("kSm90MediumF16F32NN", "sm90", "medium", "f16->f32", "NN", "Sm90MediumConfig", "f16 x @ W into a float32 result (preferred_element_type=float32)."),
    K("kSm90MediumF16F32NT", "sm90", "medium", "f16->f32", "NT", "Sm90MediumConfig", "f16 x @ W.T (transpose_b) into a float32 result."),
    K("kSm90MediumF16F32TN", "sm90", "medium", "f16->f32", "TN", "Sm90MediumConfig", "f16 x.T @ dy (transpose_a) into float32: a weight gradient kept in float32."),
    ]),
    Unit("sm90_gemm_f32_out_small", "kernels/sm90_gemm.h", SM90A,
         "SM90 ptr-array kernels (CUTLASS 3.x ptr-array TMA warp-specialized), "
         "the small_m tile, 16-bit inputs with a float32 output and C "
         "(preferred_element_type=float32).", [
    K("kSm90SmallBf16F32NN", "sm90", "small_m", "bf16->f32", "NN", "Sm90SmallConfig", "bf16 x @ W into a float32 result (preferred_element_type=float32)."),
    K("kSm90SmallBf16F32NT", "sm90", "small_m", "bf16->f32", "NT", "Sm90SmallConfig", "bf16 x @ W.T (transpose_b) into a float32 result."),
    K("kSm90SmallBf16F32TN", "sm90", "small_m", "bf16->f32", "TN", "Sm90SmallConfig", "bf16 x.T @ dy (transpose_a) into float32: a weight gradient kept in float32."),
    K("kSm90SmallF16F32NN", "sm90", "small_m", "f16->f32", "NN", "Sm90SmallConfig", "f16 x @ W into a float32 result (preferred_element_type=float32)."),
    K("kSm90SmallF16F32NT", "sm90", "small_m", "f16->f32", "NT", "Sm90SmallConfig", "f16 x @ W.T (transpose_b) into a float32 result."),
    K("kSm90SmallF16F32TN", "sm90", "small_m", "f16->f32", "TN", "Sm90SmallConfig", "f16 x.T @ dy (transpose_a) into float32: a weight gradient kept in float32."),
    ]),
    Unit("sm90_gemm_f32_out_tiny", "kernels/sm90_gemm.h", SM90A,
         "SM90 ptr-array kernels (CUTLASS 3.x ptr-array TMA warp-specialized), "
         "the tiny tile, 16-bit inputs with a float32 output and C "
         "(preferred_element_type=float32).", [
    K("kSm90TinyBf16F32NN", "sm90", "tiny", "bf16->f32", "NN", "Sm90TinyConfig", "bf16 x @ W into a float32 result (preferred_element_type=float32)."),
    K("kSm90TinyBf16F32NT", "sm90", "tiny", "bf16->f32", "NT", "Sm90TinyConfig", "bf16 x @ W.T (transpose_b) into a float32 result."),
    K("kSm90TinyBf16F32TN", "sm90", "tiny", "bf16->f32", "TN", "Sm90TinyConfig", "bf16 x.T @ dy (transpose_a) into float32: a weight gradient kept in float32."),
    K("kSm90TinyF16F32NN", "sm90", "tiny", "f16->f32", "NN", "Sm90TinyConfig", "f16 x @ W into a float32 result (preferred_element_type=float32)."),
    K("kSm90TinyF16F32NT", "sm90", "tiny", "f16->f32", "NT", "Sm90TinyConfig", "f16 x @ W.T (transpose_b) into a float32 result."),
    K("kSm90TinyF16F32TN", "sm90", "tiny", "f16->f32", "TN", "Sm90TinyConfig", "f16 x.T @ dy (transpose_a) into float32: a weight gradient kept in float32."),
    ]),
    Unit("sm90_gemm_splitk", "kernels/sm90_gemm.h", SM90A,
         "SM90 ptr-array split-K slice kernels (path sm90_split_k): one K slice "
         "per ptr-array item, float32 partials, sourceless epilogue (beta must "
         "be 0); the handler's reduction (ffi/cuda/prep_kernels.cu) applies "
         "alpha, beta * C and the cast to the output dtype.", [
    K("kSm90SplitKBf16NN", "sm90_split_k", None, "bf16->f32", "NN", None, "bf16 x @ W with skinny m (m <= 64, e.g. stacked-weights layers at m = 16)."),
    K("kSm90SplitKF16NN", "sm90_split_k", None, "f16->f32", "NN", None, "f16 x @ W with skinny m (m <= 64)."),
    ]),
    Unit("sm90_direct_large_wide", "kernels/sm90_direct.h", SM90A,
         "Direct SM90 kernels (no pointer kernel, no pointer arrays), the large "
         "path's two tiles, for one-item calls whose windows suit them "
         "(ffi/planner.cc DirectChoice).", [
    K("kSm90DirectLargeBf16NN", "sm90_direct", "large", "bf16->bf16", "NN", "Sm90DirectLargeConfig", "bf16 x @ W, large tiles."),
    K("kSm90DirectLargeF16NN", "sm90_direct", "large", "f16->f16", "NN", "Sm90DirectLargeConfig", "f16 x @ W, large tiles."),
    K("kSm90DirectWideBf16NN", "sm90_direct", "wide", "bf16->bf16", "NN", "Sm90DirectWideConfig", "bf16 x @ W, the wide tile (128x256): its m64n256 wgmmas make each tile faster where the tiles fit one wave of SMs."),
    K("kSm90DirectWideF16NN", "sm90_direct", "wide", "f16->f16", "NN", "Sm90DirectWideConfig", "f16 x @ W, the wide tile (128x256): its m64n256 wgmmas make each tile faster where the tiles fit one wave of SMs."),
    ]),
    Unit("sm90_direct_medium", "kernels/sm90_direct.h", SM90A,
         "Direct SM90 kernels (no pointer kernel, no pointer arrays), the medium "
         "tile (128x128, ping-pong), for one-item calls planned for the medium "
         "ptr-array tile whose windows suit them.", [
    K("kSm90DirectMediumBf16NN", "sm90_direct", "medium", "bf16->bf16", "NN", "Sm90DirectMediumConfig", "bf16 x @ W."),
    K("kSm90DirectMediumBf16NT", "sm90_direct", "medium", "bf16->bf16", "NT", "Sm90DirectMediumConfig", "bf16, B transposed (x @ W^T: B stored n x k)."),
    K("kSm90DirectMediumBf16TN", "sm90_direct", "medium", "bf16->bf16", "TN", "Sm90DirectMediumConfig", "bf16, A transposed (X^T @ dY: A stored k x m)."),
    K("kSm90DirectMediumF16NN", "sm90_direct", "medium", "f16->f16", "NN", "Sm90DirectMediumConfig", "f16 x @ W."),
    K("kSm90DirectMediumF16NT", "sm90_direct", "medium", "f16->f16", "NT", "Sm90DirectMediumConfig", "f16, B transposed, as bf16 has it."),
    K("kSm90DirectMediumF16TN", "sm90_direct", "medium", "f16->f16", "TN", "Sm90DirectMediumConfig", "f16, A transposed, as bf16 has it."),
    ]),
    Unit("sm90_direct_small", "kernels/sm90_direct.h", SM90A,
         "Direct SM90 kernels (no pointer kernel, no pointer arrays), the small_m "
         "tile (64x128, ping-pong), for one-item calls planned for the small "
         "ptr-array tile whose windows suit them.", [
    K("kSm90DirectSmallBf16NN", "sm90_direct", "small_m", "bf16->bf16", "NN", "Sm90DirectSmallConfig", "bf16 x @ W."),
    K("kSm90DirectSmallBf16NT", "sm90_direct", "small_m", "bf16->bf16", "NT", "Sm90DirectSmallConfig", "bf16, B transposed (x @ W^T: B stored n x k)."),
    K("kSm90DirectSmallBf16TN", "sm90_direct", "small_m", "bf16->bf16", "TN", "Sm90DirectSmallConfig", "bf16, A transposed (X^T @ dY: A stored k x m)."),
    K("kSm90DirectSmallF16NN", "sm90_direct", "small_m", "f16->f16", "NN", "Sm90DirectSmallConfig", "f16 x @ W."),
    K("kSm90DirectSmallF16NT", "sm90_direct", "small_m", "f16->f16", "NT", "Sm90DirectSmallConfig", "f16, B transposed, as bf16 has it."),
    K("kSm90DirectSmallF16TN", "sm90_direct", "small_m", "f16->f16", "TN", "Sm90DirectSmallConfig", "f16, A transposed, as bf16 has it."),
    ]),
    Unit("sm90_direct_tiny", "kernels/sm90_direct.h", SM90A,
         "Direct SM90 kernels (no pointer kernel, no pointer arrays), the tiny "
         "tile (64x64, ping-pong), for one-item calls planned for the tiny "
         "ptr-array tile whose windows suit them.", [
    K("kSm90DirectTinyBf16NN", "sm90_direct", "tiny", "bf16->bf16", "NN", "Sm90DirectTinyConfig", "bf16 x @ W."),
    K("kSm90DirectTinyBf16NT", "sm90_direct", "tiny", "bf16->bf16", "NT", "Sm90DirectTinyConfig", "bf16, B transposed (x @ W^T: B stored n x k)."),
    K("kSm90DirectTinyBf16TN", "sm90_direct", "tiny", "bf16->bf16", "TN", "Sm90DirectTinyConfig", "bf16, A transposed (X^T @ dY: A stored k x m)."),
    K("kSm90DirectTinyF16NN", "sm90_direct", "tiny", "f16->f16", "NN", "Sm90DirectTinyConfig", "f16 x @ W."),
    K("kSm90DirectTinyF16NT", "sm90_direct", "tiny", "f16->f16", "NT", "Sm90DirectTinyConfig", "f16, B transposed, as bf16 has it."),
    K("kSm90DirectTinyF16TN", "sm90_direct", "tiny", "f16->f16", "TN", "Sm90DirectTinyConfig", "f16, A transposed, as bf16 has it."),
    ]),
    Unit("sm90_direct_f32_out", "kernels/sm90_direct.h", SM90A,
         "Direct SM90 kernels with a float32 result and C of 16-bit inputs "
         "(preferred_element_type=float32: accumulating into a float32 "
         "buffer at offsets in a loop), one launch where the windows suit "
         "them; NN, the large, medium, small_m and tiny tiles.", [
    K("kSm90DirectLargeBf16F32NN", "sm90_direct", "large", "bf16->f32", "NN", "Sm90DirectLargeConfig", "bf16 x @ W into float32."),
    K("kSm90DirectMediumBf16F32NN", "sm90_direct", "medium", "bf16->f32", "NN", "Sm90DirectMediumConfig", "bf16 x @ W into float32."),
    K("kSm90DirectSmallBf16F32NN", "sm90_direct", "small_m", "bf16->f32", "NN", "Sm90DirectSmallConfig", "bf16 x @ W into float32."),
    K("kSm90DirectTinyBf16F32NN", "sm90_direct", "tiny", "bf16->f32", "NN", "Sm90DirectTinyConfig", "bf16 x @ W into float32."),
    K("kSm90DirectLargeF16F32NN", "sm90_direct", "large", "f16->f32", "NN", "Sm90DirectLargeConfig", "f16 x @ W into float32."),
    K("kSm90DirectMediumF16F32NN", "sm90_direct", "medium", "f16->f32", "NN", "Sm90DirectMediumConfig", "f16 x @ W into float32."),
    K("kSm90DirectSmallF16F32NN", "sm90_direct", "small_m", "f16->f32", "NN", "Sm90DirectSmallConfig", "f16 x @ W into float32."),
    K("kSm90DirectTinyF16F32NN", "sm90_direct", "tiny", "f16->f32", "NN", "Sm90DirectTinyConfig", "f16 x @ W into float32."),
    ]),
    Unit("sm90_direct_f32_out_t", "kernels/sm90_direct.h", SM90A,
         "Direct SM90 kernels with a float32 result of bfloat16 inputs, one "
         "operand transposed (the medium, small_m and tiny tiles, as "
         "bfloat16's own).", [
    K("kSm90DirectMediumBf16F32NT", "sm90_direct", "medium", "bf16->f32", "NT", "Sm90DirectMediumConfig", "bf16 x @ W^T into float32."),
    K("kSm90DirectMediumBf16F32TN", "sm90_direct", "medium", "bf16->f32", "TN", "Sm90DirectMediumConfig", "bf16 x^T @ dY into float32 (a weight gradient accumulated in float32)."),
    K("kSm90DirectSmallBf16F32NT", "sm90_direct", "small_m", "bf16->f32", "NT", "Sm90DirectSmallConfig", "bf16 x @ W^T into float32."),
    K("kSm90DirectSmallBf16F32TN", "sm90_direct", "small_m", "bf16->f32", "TN", "Sm90DirectSmallConfig", "bf16 x^T @ dY into float32 (a weight gradient accumulated in float32)."),
    K("kSm90DirectTinyBf16F32NT", "sm90_direct", "tiny", "bf16->f32", "NT", "Sm90DirectTinyConfig", "bf16 x @ W^T into float32."),
    K("kSm90DirectTinyBf16F32TN", "sm90_direct", "tiny", "bf16->f32", "TN", "Sm90DirectTinyConfig", "bf16 x^T @ dY into float32 (a weight gradient accumulated in float32)."),
    ]),
    Unit("sm90_direct_splitk", "kernels/sm90_direct.h", SM90A,
         "Direct SM90 split-K kernels: 128x128 cooperative tiles on the stream-K "
         "scheduler, K shared by the handler's split_k CTAs per output tile, for "
         "calls planned for split-K whose windows suit them.", [
    K("kSm90DirectSplitKBf16NN", "sm90_direct", "split_k", "bf16->bf16", "NN", "Sm90DirectSplitKConfig", "bf16 x @ W, for calls planned for split-K whose windows suit it."),
    K("kSm90DirectSplitKF16NN", "sm90_direct", "split_k", "f16->f16", "NN", "Sm90DirectSplitKConfig", "f16 x @ W, for calls planned for split-K whose windows suit it."),
    ]),
    Unit("sm90_direct_cluster_k", "kernels/sm90_cluster_k.h", SM90A,
         "Direct SM90 cluster-K kernels: 64x32 and 64x64 output tiles, each "
         "one's K split across the two CTAs of a thread-block cluster and "
         "reduced in distributed shared memory.", [
    K("kSm90DirectClusterKBf16NN", "sm90_cluster_k", "cluster_k", "bf16->bf16", "NN", None, "bf16 x @ W on the tiny path where its tiles would leave SMs idle (plan.h ClusterKTileN) or where it is forced."),
    K("kSm90DirectClusterKF16NN", "sm90_cluster_k", "cluster_k", "f16->f16", "NN", None, "f16 x @ W on the tiny path where its tiles would leave SMs idle (plan.h ClusterKTileN) or where it is forced."),
    ]),
    Unit("sm90_direct_f32", "kernels/sm90_direct_tf32.h", SM90A,
         "Direct SM90 TF32 kernels for float32 NN at default precision (TF32 "
         "wgmma, B read through registers: no staging), for one-item calls "
         "whose windows suit them.", [
    K("kSm90DirectLargeF32NN", "sm90_direct_tf32", "large", "f32->f32", "NN", "Sm90DirectTf32LargeConfig", "float32 x @ W, 256 x 128 output tiles, without the staging copy of B."),
    K("kSm90DirectMediumF32NN", "sm90_direct_tf32", "medium", "f32->f32", "NN", "Sm90DirectTf32MediumConfig", "float32 x @ W, 128 x 128 output tiles (ping-pong), without the staging copy of B."),
    ]),
    Unit("sm90_grouped", "kernels/sm90_grouped.h", SM90A,
         "SM90 grouped kernels (path sm90_grouped): ragged windows in one "
         "launch, the problem shapes on the device, no C.", [
    K("kSm90GroupedBf16NN", "sm90_grouped", "medium", "bf16->bf16", "NN", "Sm90GroupedMediumConfig", "bf16 ragged x @ W (ragged_dot), 128x128 ping-pong (grouped_tile='medium')."),
    K("kSm90GroupedBf16NT", "sm90_grouped", "medium", "bf16->bf16", "NT", "Sm90GroupedMediumConfig", "bf16 ragged x @ W^T (ragged_dot's input gradient)."),
    K("kSm90GroupedBf16TN", "sm90_grouped", "medium", "bf16->bf16", "TN", "Sm90GroupedMediumConfig", "bf16 ragged x^T @ dY (ragged_dot's weight gradient: ragged K)."),
    K("kSm90GroupedF16NN", "sm90_grouped", "medium", "f16->f16", "NN", "Sm90GroupedMediumConfig", "f16 ragged x @ W (ragged_dot)."),
    K("kSm90GroupedWideBf16NN", "sm90_grouped", "wide", "bf16->bf16", "NN", "Sm90GroupedWideConfig", "bf16 ragged x @ W, 128x256 cooperative, no cluster: the planner's choice for it (GroupedTileChoice)."),
    ]),
    Unit("sm90_grouped_more", "kernels/sm90_grouped.h", SM90A,
         "SM90 grouped kernels (path sm90_grouped) for what bfloat16 NN does "
         "not cover: float16's gradients and wide tile, and a float32 D "
         "(preferred_element_type=float32), 128x128 ping-pong.", [
    K("kSm90GroupedF16NT", "sm90_grouped", "medium", "f16->f16", "NT", "Sm90GroupedMediumConfig", "f16 ragged x @ W^T (ragged_dot's input gradient)."),
    K("kSm90GroupedF16TN", "sm90_grouped", "medium", "f16->f16", "TN", "Sm90GroupedMediumConfig", "f16 ragged x^T @ dY (ragged_dot's weight gradient: ragged K)."),
    K("kSm90GroupedWideF16NN", "sm90_grouped", "wide", "f16->f16", "NN", "Sm90GroupedWideConfig", "f16 ragged x @ W on the tile bf16 takes."),
    K("kSm90GroupedBf16F32NN", "sm90_grouped", "medium", "bf16->f32", "NN", "Sm90GroupedMediumConfig", "bf16 ragged x @ W into float32 (ragged_dot with preferred_element_type=float32)."),
    K("kSm90GroupedBf16F32NT", "sm90_grouped", "medium", "bf16->f32", "NT", "Sm90GroupedMediumConfig", "bf16 ragged x @ W^T into float32."),
    K("kSm90GroupedBf16F32TN", "sm90_grouped", "medium", "bf16->f32", "TN", "Sm90GroupedMediumConfig", "bf16 ragged x^T @ dY into float32 (a weight gradient kept in float32)."),
    K("kSm90GroupedF16F32NN", "sm90_grouped", "medium", "f16->f32", "NN", "Sm90GroupedMediumConfig", "f16 ragged x @ W into float32."),
    K("kSm90GroupedF16F32NT", "sm90_grouped", "medium", "f16->f32", "NT", "Sm90GroupedMediumConfig", "f16 ragged x @ W^T into float32."),
    K("kSm90GroupedF16F32TN", "sm90_grouped", "medium", "f16->f32", "TN", "Sm90GroupedMediumConfig", "f16 ragged x^T @ dY into float32."),
    ]),
    Unit("sm90_grouped_swiglu", "kernels/sm90_grouped.h", SM90A,
         "SM90 grouped kernels with silu(gate) * up fused in the epilogue "
         "(ragged_dot(activation='swiglu'), rhs's gate and up columns "
         "interleaved): the product never leaves registers, out has half "
         "its columns.", [
    # The wide cooperative tile only: the probe measured and checked this
    # one (1.07-1.27x the plain grouped kernel followed by a separate
    # activation on Mixtral, Qwen3 and DeepSeek-V3 up projections;
    # docs/design.md), and it is the tile the plain bfloat16 NN call takes.
    K("kSm90GroupedSwigluWideBf16NN", "sm90_grouped_swiglu", "wide", "bf16->bf16", "NN", "Sm90GroupedWideConfig", "bf16 ragged_dot(activation='swiglu'): an MoE up projection's silu(gate) * up in one grouped launch, h never written."),
    K("kSm90GroupedSwigluWideF16NN", "sm90_grouped_swiglu", "wide", "f16->f16", "NN", "Sm90GroupedWideConfig", "f16 ragged_dot(activation='swiglu'), as bf16 has it."),
    ]),
    Unit("sm90_small_group_grad", "kernels/small_group_grad.h", SM90A,
         "SM90 small-group weight-gradient kernels (grouped tile "
         "small_groups): ragged_dot's dW[e] = X_e^T G_e where the experts "
         "hold few rows, one CTA per 128 x 128 tile of dW[e], mma.sync over "
         "the expert's rows, experts without rows zeroed in the same launch.", [
    # The probe (benchmarks/small_k_grad/probe.cu) measured and checked the
    # bfloat16 one on an H100; float16 runs the same code with f16 mma.
    K("kSm90SmallGroupGradBf16TN", "sm90_small_group_grad", "small_groups", "bf16->bf16", "TN", None, "bf16 ragged_dot weight gradient with few rows per expert (decode-sized MoE layers): its time is writing dW, which this kernel does at near the write rate where the CUTLASS grouped kernel spends a k-block and an epilogue per tile."),
    K("kSm90SmallGroupGradF16TN", "sm90_small_group_grad", "small_groups", "f16->f16", "TN", None, "f16 ragged_dot weight gradient with few rows per expert, as bf16 has it (the grouped path runs f16 TN as well)."),
    # float32 results: a ragged x^T @ dY kept in float32
    # (preferred_element_type=float32), which the grouped path runs too.
    K("kSm90SmallGroupGradBf16F32TN", "sm90_small_group_grad", "small_groups", "bf16->f32", "TN", None, "bf16 ragged x^T @ dY with few rows per item into float32 (a weight gradient kept in float32)."),
    K("kSm90SmallGroupGradF16F32TN", "sm90_small_group_grad", "small_groups", "f16->f32", "TN", None, "f16 ragged x^T @ dY with few rows per item into float32."),
    ]),
    Unit("sm90_small_group_fwd", "kernels/small_group_fwd.h", SM90A,
         "SM90 small-group forward kernels (grouped tile small_groups): "
         "ragged_dot's x_e @ W[e] (NN) and its input gradient dY_e @ "
         "W[e]^T (NT) where the experts hold few rows, operands swapped "
         "(128 features of one expert a CTA as the mma's M, the expert's "
         "rows as its N, padded to 8), experts without rows reading "
         "nothing; also with ragged_dot's swiglu epilogue.", [
    # Written from benchmarks/small_groups_fwd/probe.cu (NN bfloat16, which
    # compiled but had not run on a GPU when these lines were added); NT
    # reads W[e]'s rows K-contiguous, float16 runs the same code with f16
    # mma.
    K("kSm90SmallGroupFwdBf16NN", "sm90_small_group_fwd", "small_groups", "bf16->bf16", "NN", None, "bf16 ragged_dot forward with few rows per expert (decode-sized MoE layers): the CUTLASS grouped kernel pads each expert to 128 rows, this one to 8, and its time is the weight stream."),
    K("kSm90SmallGroupFwdBf16NT", "sm90_small_group_fwd", "small_groups", "bf16->bf16", "NT", None, "bf16 ragged_dot input gradient dY @ W[e]^T with few rows per expert, as the forward has it."),
    K("kSm90SmallGroupFwdF16NN", "sm90_small_group_fwd", "small_groups", "f16->f16", "NN", None, "f16 ragged_dot forward with few rows per expert, as bf16 has it."),
    K("kSm90SmallGroupFwdF16NT", "sm90_small_group_fwd", "small_groups", "f16->f16", "NT", None, "f16 ragged_dot input gradient with few rows per expert."),
    # float32 results (preferred_element_type=float32), which the grouped
    # path runs too.
    K("kSm90SmallGroupFwdBf16F32NN", "sm90_small_group_fwd", "small_groups", "bf16->f32", "NN", None, "bf16 ragged x @ W into float32 with few rows per expert (ragged_dot with preferred_element_type=float32)."),
    K("kSm90SmallGroupFwdBf16F32NT", "sm90_small_group_fwd", "small_groups", "bf16->f32", "NT", None, "bf16 ragged x @ W^T into float32 with few rows per expert."),
    K("kSm90SmallGroupFwdF16F32NN", "sm90_small_group_fwd", "small_groups", "f16->f32", "NN", None, "f16 ragged x @ W into float32 with few rows per expert."),
    K("kSm90SmallGroupFwdF16F32NT", "sm90_small_group_fwd", "small_groups", "f16->f32", "NT", None, "f16 ragged x @ W^T into float32 with few rows per expert."),
    # ragged_dot(activation="swiglu") on the same kernel, its epilogue
    # silu(gate) * up over interleaved columns: run only where
    # KernelOptions(grouped_tile="small_groups") forces it, beside the
    # fused CUTLASS kernel the planner keeps, until GPU timings compare them.
    K("kSm90SmallGroupFwdSwigluBf16NN", "sm90_small_group_fwd_swiglu", "small_groups", "bf16->bf16", "NN", None, "bf16 ragged_dot(activation='swiglu') with few rows per expert, each expert's rows padded to 8 instead of 128 (forced; to be timed against the fused CUTLASS kernel)."),
    K("kSm90SmallGroupFwdSwigluF16NN", "sm90_small_group_fwd_swiglu", "small_groups", "f16->f16", "NN", None, "f16 ragged_dot(activation='swiglu') with few rows per expert, as bf16 has it."),
    ]),
    Unit("sm90_skinny", "kernels/sm90_skinny.h", SM90A,
         "SM90 skinny kernels (m <= 16): mma.sync CTAs streaming B, the CTAs "
         "of a column tile sharing K in a cluster, one launch.", [
    K("kSm90Skinny16Bf16NN", "sm90_skinny", "wide", "bf16->bf16", "NN", "1", "bf16 x @ W for m <= 16 (stacked-weight layers, decode steps)."),
    K("kSm90Skinny16F16NN", "sm90_skinny", "wide", "f16->f16", "NN", "1", "f16 x @ W for m <= 16 (stacked-weight layers, decode steps)."),
    K("kSm90Skinny16Bf16NT", "sm90_skinny", "wide", "bf16->bf16", "NT", "1", "bf16 x @ W^T for m <= 16 (the gradient wrt x of a skinny layer, dX = dY W^T), B's rows K-contiguous."),
    K("kSm90Skinny16F16NT", "sm90_skinny", "wide", "f16->f16", "NT", "1", "f16 x @ W^T for m <= 16, as bf16 has it."),
    K("kSm90Skinny16Bf16F32NN", "sm90_skinny", "wide", "bf16->f32", "NN", "1", "bf16 x @ W into float32 for m <= 16 (a decode step's logits in float32)."),
    K("kSm90Skinny16Bf16F32NT", "sm90_skinny", "wide", "bf16->f32", "NT", "1", "bf16 x @ W^T into float32 for m <= 16 (logits against tied embeddings)."),
    K("kSm90Skinny16F16F32NN", "sm90_skinny", "wide", "f16->f32", "NN", "1", "f16 x @ W into float32 for m <= 16."),
    K("kSm90Skinny16F16F32NT", "sm90_skinny", "wide", "f16->f32", "NT", "1", "f16 x @ W^T into float32 for m <= 16."),
    ]),
    Unit("sm90_skinny_narrow", "kernels/sm90_skinny_narrow.h", SM90A,
         "SM90 skinny kernels, the narrow tile (m <= 16): 16 columns a CTA "
         "over all of K, the warps splitting K, no cluster; one launch.", [
    K("kSm90SkinnyNarrowBf16NN", "sm90_skinny_narrow", "narrow", "bf16->bf16", "NN", None, "bf16 x @ W for m <= 16 where K is short (a decode step's second projection, K = 512): no cluster reduction."),
    K("kSm90SkinnyNarrowF16NN", "sm90_skinny_narrow", "narrow", "f16->f16", "NN", None, "f16 x @ W for m <= 16 where K is short, as bf16 has it."),
    K("kSm90SkinnyNarrowBf16NT", "sm90_skinny_narrow", "narrow", "bf16->bf16", "NT", None, "bf16 x @ W^T for m <= 16 where K is short (dX = dY W^T of a skinny layer)."),
    K("kSm90SkinnyNarrowF16NT", "sm90_skinny_narrow", "narrow", "f16->f16", "NT", None, "f16 x @ W^T for m <= 16 where K is short."),
    K("kSm90SkinnyNarrowBf16F32NN", "sm90_skinny_narrow", "narrow", "bf16->f32", "NN", None, "bf16 x @ W into float32 for m <= 16 where K is short."),
    K("kSm90SkinnyNarrowBf16F32NT", "sm90_skinny_narrow", "narrow", "bf16->f32", "NT", None, "bf16 x @ W^T into float32 for m <= 16 where K is short."),
    K("kSm90SkinnyNarrowF16F32NN", "sm90_skinny_narrow", "narrow", "f16->f32", "NN", None, "f16 x @ W into float32 for m <= 16 where K is short."),
    K("kSm90SkinnyNarrowF16F32NT", "sm90_skinny_narrow", "narrow", "f16->f32", "NT", None, "f16 x @ W^T into float32 for m <= 16 where K is short."),
    ]),
    Unit("sm90_tf32", "kernels/sm90_tf32_gemm.h", SM90A,
         "SM90 TF32 ptr-array kernels for float32 (TF32 wgmma): A row-major, B "
         "stored n x k (both K-major); an MN-major operand is staged K-major "
         "first (kernels/sm90_tf32.h).", [
    # Two float32 tiles keep the build small (each CUTLASS 3.x kernel costs
    # minutes of nvcc); the planner's wave model chooses between them.
    K("kSm90Tf32LargeNT", "sm90_tf32", "large", "f32->f32", "NT", "Sm90Tf32LargeConfig", "float32 at default precision, the large tile."),
    K("kSm90Tf32MediumNT", "sm90_tf32", "medium", "f32->f32", "NT", "Sm90Tf32MediumConfig", "float32 at default precision, the medium tile."),
    # Promoted because the wgmma accumulation alone lets 3xTF32's error grow
    # with K; promoted, its error is that of the exact SIMT kernel.  The
    # 256x128 tile spilled registers and ran slower than XLA's HIGHEST,
    # hence 128x128, which passes the same accuracy tests (the figures:
    # docs/design.md).
    K("kSm90Tf32HighestNT", "sm90_tf32_promoted", "large|medium", "f32->f32", "NT", "Sm90Tf32HighestConfig", "precision=HIGHEST as 3xTF32 on the staged parts, for either float32 tile path: 128x128x32 cooperative, accumulators promoted to float32 every k-tile."),
    ]),
]

# --- Checks -------------------------------------------------------------------


def _check(units):
  """Raises ValueError on a line the generator cannot turn into C++, or two
  lines that one lookup could not tell apart (the first would shadow the
  second)."""
  names, unit_names, served = set(), set(), {}
  for u in units:
    if u.name in unit_names:
      raise ValueError(f"unit {u.name} twice")
    unit_names.add(u.name)
    if u.arch not in (EVERY_ARCH, SM90A):
      raise ValueError(f"unit {u.name}: arch {u.arch!r}")
    for k in u.kernels:
      where = f"{u.name}: {k.name}"
      if k.name in names:
        raise ValueError(f"{where}: name twice")
      names.add(k.name)
      if k.kind not in KINDS:
        raise ValueError(f"{where}: kind {k.kind!r}")
      kind = KINDS[k.kind]
      _, tile_enum, tiles = FAMILIES[kind.family]
      if tile_enum is None and k.tile is not None:
        raise ValueError(f"{where}: {kind.family} has no tiles")
      if tile_enum is not None:
        if k.tile is None or any(t not in tiles for t in k.tile.split("|")):
          raise ValueError(f"{where}: tile {k.tile!r}, want one of "
                           f"{'|'.join(tiles)}")
      if k.dtypes not in kind.dtypes:
        raise ValueError(f"{where}: dtypes {k.dtypes!r}, want one of "
                         f"{', '.join(kind.dtypes)}")
      if k.layout not in kind.layouts:
        raise ValueError(f"{where}: layout {k.layout!r}, want one of "
                         f"{', '.join(kind.layouts)}")
      if kind.config != (k.config is not None):
        raise ValueError(f"{where}: {k.kind} "
                         f"{'needs' if kind.config else 'takes no'} configuration")
      if not k.why:
        raise ValueError(f"{where}: say why it exists")
      for key in _served(k, *k.dtypes.split("->")):
        if key in served:
          raise ValueError(f"{where}: serves what {served[key]} serves")
        served[key] = k.name


def _served(k, dtype_in, dtype_out):
  """(family, tile, in, out, layout) of every call k serves."""
  kind = KINDS[k.kind]
  tiles = k.tile.split("|") if k.tile else [None]
  layouts = LAYOUTS if kind.any_layout else [k.layout]
  return [(kind.family, t, dtype_in, dtype_out, l)
          for t in tiles for l in layouts]


# Lines with the dtypes split, as the kinds' macros read them.
Kernel = collections.namedtuple("Kernel", K._fields + ("dtype_in", "dtype_out"))


def _kernels(unit):
  return [Kernel(*k, *k.dtypes.split("->")) for k in unit.kernels]


# --- Generated text -----------------------------------------------------------

GENERATED = ("// Generated from ffi/kernels/catalogue.py at configure time: edit "
             "the table there.\n")


def _comment(text, width=78):
  """`text` as // lines of at most `width` characters."""
  lines, line = [], "//"
  for word in text.split():
    if len(line) + 1 + len(word) > width and line != "//":
      lines.append(line)
      line = "//"
    line += " " + word
  lines.append(line)
  return "\n".join(lines) + "\n"


def unit_source(unit):
  out = [GENERATED, "//\n", _comment(unit.about), "//\n",
         _comment("Each kernel's line says why it exists; the table "
                  "(ffi/kernels/catalogue.py) says which lookup finds it."),
         f'#include "{unit.header}"\n']
  for k in _kernels(unit):
    macro, args = KINDS[k.kind].macro(k)
    out.append("\n" + _comment(k.why))
    out.append(f"{macro}({', '.join([k.name] + args)})\n")
  return "".join(out)


def _tile_bits(k):
  kind = KINDS[k.kind]
  _, tile_enum, tiles = FAMILIES[kind.family]
  if tile_enum is None:
    return "kAllTiles"
  return " | ".join(f"TileBit({tile_enum}::{tiles[t]})"
                    for t in k.tile.split("|"))


def _layout_bits(k):
  if KINDS[k.kind].any_layout:
    return "kAllLayouts"
  return (f"LayoutBit({_bool(k.layout[0] == 'T')}, "
          f"{_bool(k.layout[1] == 'T')})")


def table_header(units):
  rows = []
  for u in units:
    for k in _kernels(u):
      family = FAMILIES[KINDS[k.kind].family][0]
      rows.append(
          f'    {{"{k.name}", KernelFamily::{family}, {_tile_bits(k)},\n'
          f"     {DTYPES[k.dtype_in][2]}, {DTYPES[k.dtype_out][2]}, "
          f"{_layout_bits(k)}}},\n")
  return (
      GENERATED + "//\n"
      "// The kernel catalogue as constexpr C++ (kernels/catalogue.h says what a\n"
      "// line holds and how to search it), one line per kernel, in the table's\n"
      "// order.  Every line, whether or not this build compiles the kernel: the\n"
      "// planner's answers are the catalogue's.\n"
      "#ifndef JAX_DYNOFF_KERNELS_CATALOGUE_TABLE_H_\n"
      "#define JAX_DYNOFF_KERNELS_CATALOGUE_TABLE_H_\n\n"
      "namespace jax_dynoff {\nnamespace kernels {\n\n"
      "inline constexpr CatalogueKernel kCatalogue[] = {\n" + "".join(rows) +
      "};\n\n}  // namespace kernels\n}  // namespace jax_dynoff\n\n"
      "#endif  // JAX_DYNOFF_KERNELS_CATALOGUE_TABLE_H_\n")


def entries_header(units):
  decls = {EVERY_ARCH: [], SM90A: []}
  built = []
  for u in units:
    for k in _kernels(u):
      decls[u.arch].append(f"extern const {KINDS[k.kind].entry} {k.name};\n")
      built.append(f"    JAX_DYNOFF_BUILT_{u.arch.upper()}({k.name}),\n")
  return (
      GENERATED + "//\n"
      "// The catalogue's entries (kernels/launch.h types), defined by the\n"
      "// instantiation units, and kBuiltKernels: by index in kCatalogue, the\n"
      "// entry this build compiled for each line (none for the sm_90a kernels\n"
      "// where JAX_DYNOFF_CUDA_ARCHS lacks 90a).  For the registry.\n"
      "#ifndef JAX_DYNOFF_KERNELS_CATALOGUE_ENTRIES_H_\n"
      "#define JAX_DYNOFF_KERNELS_CATALOGUE_ENTRIES_H_\n\n"
      '#include "kernels/catalogue.h"\n'
      '#include "kernels/launch.h"\n\n'
      "namespace jax_dynoff {\nnamespace kernels {\n\n"
      + "".join(decls[EVERY_ARCH]) +
      "#ifdef JAX_DYNOFF_WITH_SM90\n" + "".join(decls[SM90A]) + "#endif\n\n"
      "// One catalogue line's entry: the member of its family's entry type.\n"
      "struct BuiltKernel {\n"
      "  const KernelEntry* gemm = nullptr;\n"
      "  const DirectKernelEntry* direct = nullptr;\n"
      "  const GroupedKernelEntry* grouped = nullptr;\n"
      "  const SkinnyKernelEntry* skinny = nullptr;\n"
      "  constexpr BuiltKernel() = default;\n"
      "  constexpr BuiltKernel(const KernelEntry* e) : gemm(e) {}\n"
      "  constexpr BuiltKernel(const DirectKernelEntry* e) : direct(e) {}\n"
      "  constexpr BuiltKernel(const GroupedKernelEntry* e) : grouped(e) {}\n"
      "  constexpr BuiltKernel(const SkinnyKernelEntry* e) : skinny(e) {}\n"
      "};\n\n"
      "#define JAX_DYNOFF_BUILT_EVERY_ARCH(entry) BuiltKernel(&entry)\n"
      "#ifdef JAX_DYNOFF_WITH_SM90\n"
      "#define JAX_DYNOFF_BUILT_SM90A(entry) BuiltKernel(&entry)\n"
      "#else\n"
      "#define JAX_DYNOFF_BUILT_SM90A(entry) BuiltKernel()\n"
      "#endif\n\n"
      "inline constexpr BuiltKernel kBuiltKernels[] = {\n" + "".join(built) +
      "};\n"
      "static_assert(sizeof(kBuiltKernels) / sizeof(kBuiltKernels[0]) ==\n"
      "                  sizeof(kCatalogue) / sizeof(kCatalogue[0]),\n"
      '              "one built entry per catalogue line");\n\n'
      "#undef JAX_DYNOFF_BUILT_EVERY_ARCH\n"
      "#undef JAX_DYNOFF_BUILT_SM90A\n\n"
      "}  // namespace kernels\n}  // namespace jax_dynoff\n\n"
      "#endif  // JAX_DYNOFF_KERNELS_CATALOGUE_ENTRIES_H_\n")


def _describe(k):
  """One kernel as the build info lists it."""
  parts = [k.tile.replace("|", "/")] if k.tile else []
  layout = "any layout" if k.layout == "any" else k.layout
  if KINDS[k.kind].any_layout and k.layout != "any":
    layout += " (every layout, staged)"
  parts.append(f"{k.dtypes} {layout}")
  if k.config:
    parts.append(k.config + KINDS[k.kind].config_unit)
  return f"{k.name} ({', '.join(parts)})"


def build_info_header(units):
  info = {}
  for arch in (EVERY_ARCH, SM90A):
    families = {}
    for u in units:
      if u.arch == arch:
        for k in _kernels(u):
          families.setdefault(KINDS[k.kind].family, []).append(_describe(k))
    info[arch] = "; ".join(f"{f}: {', '.join(ks)}" for f, ks in families.items())
  return (
      GENERATED + "//\n"
      "// The catalogue's kernels as BuildInfo (ffi/cuda/registry.cu) lists\n"
      "// them: family: name (tile, dtypes layout, configuration), ...\n"
      "#ifndef JAX_DYNOFF_KERNELS_CATALOGUE_BUILD_INFO_H_\n"
      "#define JAX_DYNOFF_KERNELS_CATALOGUE_BUILD_INFO_H_\n\n"
      "// Compiled for every architecture.\n"
      f'#define JAX_DYNOFF_CATALOGUE_EVERY_ARCH "{info[EVERY_ARCH]}"\n'
      "// Compiled where JAX_DYNOFF_CUDA_ARCHS lists 90a.\n"
      f'#define JAX_DYNOFF_CATALOGUE_SM90A "{info[SM90A]}"\n\n'
      "#endif  // JAX_DYNOFF_KERNELS_CATALOGUE_BUILD_INFO_H_\n")


def cmake_lists(units, out_dir):
  def paths(arch):
    return "".join(f'\n    "{os.path.join(out_dir, "kernels", u.name + ".cu")}"'
                   for u in units if u.arch == arch)
  return (
      "# Generated from ffi/kernels/catalogue.py at configure time.\n"
      "# The instantiation units: compiled for every architecture, and for\n"
      "# sm_90a only.\n"
      f"set(JAX_DYNOFF_EVERY_ARCH_UNITS{paths(EVERY_ARCH)})\n"
      f"set(JAX_DYNOFF_SM90A_UNITS{paths(SM90A)})\n")


def _write(path, text):
  """Writes `text` to `path` unless it holds it already."""
  try:
    with open(path, encoding="utf-8") as f:
      if f.read() == text:
        return
  except FileNotFoundError:
    pass
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)


def generate(out_dir):
  _check(UNITS)
  out_dir = os.path.abspath(out_dir).replace(os.sep, "/")
  kernels_dir = os.path.join(out_dir, "kernels")
  os.makedirs(kernels_dir, exist_ok=True)
  units = {u.name + ".cu" for u in UNITS}
  for name in os.listdir(kernels_dir):  # a unit no longer in the table
    if name.endswith(".cu") and name not in units:
      os.remove(os.path.join(kernels_dir, name))
  for u in UNITS:
    _write(os.path.join(kernels_dir, u.name + ".cu"), unit_source(u))
  _write(os.path.join(kernels_dir, "catalogue_table.h"), table_header(UNITS))
  _write(os.path.join(kernels_dir, "catalogue_entries.h"),
         entries_header(UNITS))
  _write(os.path.join(kernels_dir, "catalogue_build_info.h"),
         build_info_header(UNITS))
  _write(os.path.join(out_dir, "catalogue.cmake"), cmake_lists(UNITS, out_dir))


if __name__ == "__main__":
  if len(sys.argv) != 2:
    sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
  generate(sys.argv[1])
