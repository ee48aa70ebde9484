/*
 * kernels/emu/cg_shim.h — cooperative groups on the CPU emulator: the text
 * a candidate's #include <cooperative_groups.h> finds on cpu-emu (the
 * emulator's build folder holds it under that name; cuda_shim.h, already
 * pre-included, supplies the runtime it calls).
 *
 * The block- and tile-level subset of CUDA 13's header, member for member:
 *   - thread_block, from this_thread_block(): sync, thread_rank, size,
 *     num_threads, group_index, thread_index, group_dim, dim_threads;
 *   - thread_block_tile<N, ParentT> for N = 1, 2, 4, 8, 16, 32, from
 *     tiled_partition<N>(a block or a bigger tile), and this_thread():
 *     sync, thread_rank, size, num_threads, meta_group_rank,
 *     meta_group_size, shfl, shfl_down, shfl_up, shfl_xor, any, all,
 *     ballot; a tile with a parent converts to thread_block_tile<N>;
 *   - cg::sync(g), cg::thread_rank(g), cg::group_size(g).
 * cg::reduce and its operators are cg_reduce_shim.h's, as on a device
 * (<cooperative_groups/reduce.h>).
 *
 * Semantics, as the device header's: a block's sync is __syncthreads; a
 * tile's sync and collectives are a barrier of the tile's own lanes (the
 * runtime's lane-group barrier, __syncwarp(tile mask) on a device), so the
 * tiles of one warp may take different paths. Shuffles read within the
 * tile (width N, as __shfl_*_sync(mask, v, ..., N)): a source outside it
 * gives the caller's own value. Values of any trivially copyable type
 * travel, 8 bytes an exchange. ballot is the tile's votes from bit 0; all
 * is true when every lane of the tile voted (a lane that has returned
 * does not), as the device compares with the tile's mask.
 *
 * What a kernel could read to tell the emulator is the device's too: the
 * member types, sizeof and alignof of every group type (thread_block 24/8,
 * a tile without parent 16/8, with one 1/1), whether it is empty,
 * trivially copyable or standard-layout (as CUDA 13's NVRTC answers), and
 * num_threads() and size() of a tile usable in constant expressions.
 *
 * Absent, and refused before any compile with a message that says why
 * (kernels/source.c, kl_source_validate): grid, multi-grid and cluster
 * groups (they need a cooperative launch the harness does not make),
 * memcpy_async and wait, coalesced and labeled groups, thread_group and
 * the run-time tiled_partition(g, n), tiles of several warps, split
 * arrive/wait barriers, match_any/match_all.
 */
#ifndef KL_EMU_CG_SHIM_H
#define KL_EMU_CG_SHIM_H

namespace cooperative_groups {

class thread_block;
template <unsigned int Size, typename ParentT = void> class thread_block_tile;

namespace kl_emu_impl {

/* v sent through the exchange of the lanes in `lanes`, read from lane src:
 * 8 bytes an exchange. */
template <class T>
static inline T exchange(const T &v, int src, unsigned lanes) {
  static_assert(__is_trivially_copyable(T),
                "cooperative groups shuffle a trivially copyable type");
  unsigned char in[sizeof(T)], out[sizeof(T)];
  memcpy(in, &v, sizeof(T));
  for (unsigned off = 0; off < sizeof(T); off += 8) {
    unsigned n = sizeof(T) - off < 8 ? (unsigned)sizeof(T) - off : 8;
    uint64_t mine = 0;
    memcpy(&mine, in + off, n);
    uint64_t got = kl_emu_exchange(mine, src, lanes);
    memcpy(out + off, &got, n);
  }
  return __builtin_bit_cast(T, out);
}

/* What every tile of Size threads has; the device's
 * __static_size_thread_block_tile_base. */
template <unsigned int Size> class tile_base {
  static_assert(Size == 1 || Size == 2 || Size == 4 || Size == 8 ||
                    Size == 16 || Size == 32,
                "thread_block_tile<Size>: Size must be one of 1/2/4/8/16/32 "
                "(tiles of several warps are not supported by kernlab)");

protected:
  static int first_lane() {
    return kl_emu_cur->lane & ~(int)(Size - 1);
  }
  /* the warp's lanes of my tile, a bit per lane */
  static unsigned lanes() {
    return Size == 32 ? 0xffffffffu
                      : ((1u << Size) - 1) << (unsigned)first_lane();
  }
  static unsigned vote(int predicate) {
    unsigned out = 0;
    kl_emu_exchange(predicate != 0, kl_emu_cur->lane, lanes(), &out);
    return out;
  }

public:
  static unsigned int thread_rank() {
    return (unsigned)kl_emu_cur->linear & (Size - 1);
  }
  static constexpr unsigned int num_threads() {
    return Size;
  }
  static constexpr unsigned int size() {
    return num_threads();
  }
  static void sync() {
    kl_emu_hooks_ptr->sync_warp(lanes());
  }
  template <class T> T shfl(T v, int src_rank) const {
    return exchange(v, first_lane() + (src_rank & (int)(Size - 1)), lanes());
  }
  template <class T> T shfl_down(T v, unsigned int delta) const {
    int lane = kl_emu_cur->lane;
    bool inside = (unsigned long long)(lane - first_lane()) + delta < Size;
    return exchange(v, inside ? lane + (int)delta : lane, lanes());
  }
  template <class T> T shfl_up(T v, unsigned int delta) const {
    int lane = kl_emu_cur->lane;
    bool inside = (unsigned)(lane - first_lane()) >= delta;
    return exchange(v, inside ? lane - (int)delta : lane, lanes());
  }
  template <class T> T shfl_xor(T v, unsigned int lane_mask) const {
    int lane = kl_emu_cur->lane;
    int src = lane ^ (int)(lane_mask & 31);
    if ((src & ~(int)(Size - 1)) != first_lane() || lane_mask > 31) src = lane;
    return exchange(v, src, lanes());
  }
  int any(int predicate) const {
    return vote(predicate) != 0;
  }
  int all(int predicate) const {
    return vote(predicate) == lanes();
  }
  unsigned int ballot(int predicate) const {
    return vote(predicate) >> (unsigned)first_lane();
  }
};

/* Which groups tiled_partition<Size> splits (the device's
 * tiled_partition_impl): a block, or a tile bigger than Size. */
template <unsigned int Size, class ParentT> struct partitions {
  enum { value = 0 };
};
template <unsigned int Size> struct partitions<Size, thread_block> {
  enum { value = 1 };
};
template <unsigned int Size, unsigned int ParentSize, class GrandParentT>
struct partitions<Size, thread_block_tile<ParentSize, GrandParentT>> {
  enum { value = Size < ParentSize ? 1 : 2 };
};

} // namespace kl_emu_impl

class thread_block {
  /* the device's size and alignment; members of two access levels make it
   * not standard-layout, as the device's (a base and a derived class) */
  unsigned long long kl_emu_data_[2];
  thread_block() : kl_emu_data_{}, kl_emu_more_(0) {}
  friend thread_block this_thread_block();

protected:
  unsigned long long kl_emu_more_;

public:
  static void sync() {
    __syncthreads();
  }
  static unsigned int thread_rank() {
    return (unsigned)kl_emu_cur->linear;
  }
  static unsigned int size() {
    return blockDim.x * blockDim.y * blockDim.z;
  }
  static unsigned int num_threads() {
    return size();
  }
  static dim3 group_index() {
    return dim3(blockIdx.x, blockIdx.y, blockIdx.z);
  }
  static dim3 thread_index() {
    return dim3(threadIdx.x, threadIdx.y, threadIdx.z);
  }
  static dim3 dim_threads() {
    return dim3(blockDim.x, blockDim.y, blockDim.z);
  }
  static dim3 group_dim() {
    return dim_threads();
  }
};

inline thread_block this_thread_block() {
  return thread_block();
}

/* A tile whose parent type is known: its place in the parent follows
 * from the parent's rank (the device keeps no data either). */
template <unsigned int Size, typename ParentT>
class thread_block_tile : public kl_emu_impl::tile_base<Size> {
  template <unsigned int S, typename P>
  friend thread_block_tile<S, P> tiled_partition(const P &g);
  thread_block_tile() {}

public:
  static unsigned int meta_group_rank() {
    return ParentT::thread_rank() / Size;
  }
  static unsigned int meta_group_size() {
    return (ParentT::size() + Size - 1) / Size;
  }
  operator thread_block_tile<Size, void>() const {
    return thread_block_tile<Size, void>(*this);
  }
};

/* A tile that keeps its place in the parent it came from. */
template <unsigned int Size>
class alignas(8) thread_block_tile<Size, void>
    : public kl_emu_impl::tile_base<Size> {
  unsigned int meta_rank_, meta_size_, kl_emu_pad_[2];
  template <unsigned int, typename> friend class thread_block_tile;
  friend thread_block_tile<1, void> this_thread();
  thread_block_tile(unsigned int rank, unsigned int n)
      : meta_rank_(rank), meta_size_(n), kl_emu_pad_{} {}

public:
  /* user-provided, so not trivially copyable, as the device's */
  thread_block_tile(const thread_block_tile &g)
      : meta_rank_(g.meta_rank_), meta_size_(g.meta_size_), kl_emu_pad_{} {}
  thread_block_tile &operator=(const thread_block_tile &g) {
    meta_rank_ = g.meta_rank_, meta_size_ = g.meta_size_;
    return *this;
  }
  template <typename ParentT>
  thread_block_tile(const thread_block_tile<Size, ParentT> &g)
      : meta_rank_(g.meta_group_rank()),
        meta_size_(g.meta_group_size()), kl_emu_pad_{} {}
  unsigned int meta_group_rank() const {
    return meta_rank_;
  }
  unsigned int meta_group_size() const {
    return meta_size_;
  }
};

template <unsigned int Size, typename ParentT>
thread_block_tile<Size, ParentT> tiled_partition(const ParentT &g) {
  static_assert(kl_emu_impl::partitions<Size, ParentT>::value != 0,
                "tiled_partition<Size>(g): g must be a thread_block or a "
                "thread_block_tile");
  static_assert(kl_emu_impl::partitions<Size, ParentT>::value != 2,
                "Tile size bigger or equal to the parent group size");
  (void)g;
  return thread_block_tile<Size, ParentT>();
}

inline thread_block_tile<1, void> this_thread() {
  return thread_block_tile<1, void>(0, 1);
}

template <class GroupT> inline void sync(GroupT const &g) {
  g.sync();
}
template <class GroupT>
inline auto thread_rank(GroupT const &g) -> decltype(g.thread_rank()) {
  return g.thread_rank();
}
template <class GroupT>
inline auto group_size(GroupT const &g) -> decltype(g.num_threads()) {
  return g.num_threads();
}

} // namespace cooperative_groups

#endif /* KL_EMU_CG_SHIM_H */
