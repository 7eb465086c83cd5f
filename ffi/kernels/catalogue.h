// The kernel catalogue as C++: what one line of it holds, and the search
// the planner and the registry make in it.  The lines themselves come from
// the table in ffi/kernels/catalogue.py, generated into
// kernels/catalogue_table.h at configure time.
//
// Plain C++, no CUDA: the planner (ffi/planner.cc) asks it whether a kernel
// exists in every build, the CPU-only one included, so that a plan is the
// same wherever it is made; the choice function (ffi/launch_choice.h) asks
// it which line a call runs, and the registry (ffi/cuda/registry.h) gives
// that line's entry from kernels/catalogue_entries.h.
#ifndef JAX_DYNOFF_KERNELS_CATALOGUE_H_
#define JAX_DYNOFF_KERNELS_CATALOGUE_H_

#include <cstdint>

#include "gemm_problem.h"  // DType
#include "planner.h"       // Sm90Tile, DirectTile, GroupedTile

namespace jax_dynoff {
namespace kernels {

// A line's kind of kernel, and so its entry type (BuiltKernel's field)
// and which tile enum its tiles are codes of.
enum class KernelFamily {
  kGeneric,          // CUTLASS 2.x SIMT, every GPU: KernelEntry
  kTf32,             // CUTLASS 2.x TF32, every GPU: KernelEntry
  kSm90,             // SM90 ptr-array: KernelEntry, Sm90Tile
  kSm90Tf32Highest,  // SM90 3xTF32 ptr-array: KernelEntry, Sm90Tile
  kSm90SplitK,       // SM90 ptr-array K slices: KernelEntry
  kSm90Direct,       // SM90 direct: DirectKernelEntry, DirectTile
  kSm90Grouped,      // SM90 grouped: GroupedKernelEntry, GroupedTile
  // SM90 grouped with the swiglu epilogue fused (Epilogue::kSwiglu):
  // GroupedKernelEntry, GroupedTile.  A family of its own: its lines
  // serve the same tiles, dtypes and layouts as plain grouped ones.
  kSm90GroupedSwiglu,
  kSm90Skinny,       // the skinny kernel: SkinnyKernelEntry
};

// Bit sets of the tiles and the transposes a line serves.
inline constexpr uint32_t kAllTiles = ~0u;  // a family without tiles
template <class TileEnum>
constexpr uint32_t TileBit(TileEnum t) {
  return 1u << static_cast<int>(t);
}
constexpr uint32_t LayoutBit(bool ta, bool tb) {
  return 1u << (2 * int{ta} + int{tb});
}
inline constexpr uint32_t kAllLayouts = 0xf;

// One kernel of the catalogue.
struct CatalogueKernel {
  const char* name;     // its entry's name, as logs and explain print it
  KernelFamily family;  // the lookup that finds it
  uint32_t tiles;       // the tile codes it serves (TileBit)
  DType in, out;        // out: float32 for the split-K slices' partials
  uint32_t layouts;     // the transposes it serves (LayoutBit): more than
                        // its own where the runner stages operands
};

}  // namespace kernels
}  // namespace jax_dynoff

#include "kernels/catalogue_table.h"  // kCatalogue

namespace jax_dynoff {
namespace kernels {

// The grouped family that runs a call with epilogue `e`.
constexpr KernelFamily GroupedFamily(Epilogue e) {
  return e == Epilogue::kSwiglu ? KernelFamily::kSm90GroupedSwiglu
                                : KernelFamily::kSm90Grouped;
}

inline constexpr int kCatalogueSize =
    static_cast<int>(sizeof(kCatalogue) / sizeof(kCatalogue[0]));

// A search of the catalogue: the lines of one family, narrowed by each
// field that is set (a field left unset matches every line).
//   KernelQuery(KernelFamily::kSm90Direct).Tile(t).Dtypes(in, out)
//       .Transposes(ta, tb).Find()
class KernelQuery {
 public:
  constexpr explicit KernelQuery(KernelFamily family) : family_(family) {}

  // `tile`: a code of the family's tile enum; one out of range matches
  // nothing.
  template <class TileEnum>
  constexpr KernelQuery Tile(TileEnum tile) const {
    KernelQuery q = *this;
    q.tile_set_ = true;
    q.tile_ = static_cast<int64_t>(tile);
    return q;
  }
  constexpr KernelQuery In(DType in) const {
    KernelQuery q = *this;
    q.in_ = static_cast<int>(in);
    return q;
  }
  constexpr KernelQuery Dtypes(DType in, DType out) const {
    KernelQuery q = In(in);
    q.out_ = static_cast<int>(out);
    return q;
  }
  constexpr KernelQuery Transposes(bool ta, bool tb) const {
    KernelQuery q = *this;
    q.layout_ = static_cast<int>(LayoutBit(ta, tb));
    return q;
  }

  constexpr bool Matches(const CatalogueKernel& k) const {
    if (k.family != family_) return false;
    if (tile_set_ &&
        (tile_ < 0 || tile_ >= 32 || !((k.tiles >> tile_) & 1u)))
      return false;
    if (in_ != kAny && static_cast<int>(k.in) != in_) return false;
    if (out_ != kAny && static_cast<int>(k.out) != out_) return false;
    return layout_ == kAny || (k.layouts & static_cast<uint32_t>(layout_));
  }
  // The index in kCatalogue of the first matching line, or -1.
  constexpr int Find() const {
    for (int i = 0; i < kCatalogueSize; ++i)
      if (Matches(kCatalogue[i])) return i;
    return -1;
  }
  constexpr bool Any() const { return Find() >= 0; }

 private:
  static constexpr int kAny = -1;
  KernelFamily family_;
  bool tile_set_ = false;
  int64_t tile_ = 0;
  int in_ = kAny, out_ = kAny;
  int layout_ = kAny;  // a LayoutBit
};

}  // namespace kernels
}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_KERNELS_CATALOGUE_H_
