/*
 * kernels/emu/cg_reduce_shim.h — cg::reduce on the CPU emulator: the text a
 * candidate's #include <cooperative_groups/reduce.h> finds on cpu-emu.
 *
 * reduce(tile, value, op) with the device header's operators (plus, less,
 * greater, bit_and, bit_or, bit_xor, or any callable), over a
 * thread_block_tile, in the device's order: a butterfly of shfl_xor from
 * half the tile down to 1 (details/coalesced_reduce.h), so float sums come
 * out bit for bit as a GPU's. (A device reduces 32-bit integers of tiles
 * of 16 or 32 with redux.sync instead; integer results are the same in any
 * order.) A thread_block has no reduce, as on a device; the asynchronous
 * reduce_update_async/reduce_store_async are refused before compiling
 * (kernels/source.c).
 */
#ifndef KL_EMU_CG_REDUCE_SHIM_H
#define KL_EMU_CG_REDUCE_SHIM_H

#include <cooperative_groups.h>

namespace cooperative_groups {

template <typename Ty> struct plus {
  Ty operator()(Ty arg1, Ty arg2) const {
    return arg1 + arg2;
  }
};
template <typename Ty> struct less {
  Ty operator()(Ty arg1, Ty arg2) const {
    return (arg2 < arg1) ? arg2 : arg1;
  }
};
template <typename Ty> struct greater {
  Ty operator()(Ty arg1, Ty arg2) const {
    return (arg1 < arg2) ? arg2 : arg1;
  }
};
template <typename Ty> struct bit_and {
  Ty operator()(Ty arg1, Ty arg2) const {
    return arg1 & arg2;
  }
};
template <typename Ty> struct bit_xor {
  Ty operator()(Ty arg1, Ty arg2) const {
    return arg1 ^ arg2;
  }
};
template <typename Ty> struct bit_or {
  Ty operator()(Ty arg1, Ty arg2) const {
    return arg1 | arg2;
  }
};

namespace kl_emu_impl {
template <class GroupT> struct tile_size {
  enum { value = 0 };
};
template <unsigned int Size, typename ParentT>
struct tile_size<thread_block_tile<Size, ParentT>> {
  enum { value = Size };
};
} // namespace kl_emu_impl

template <typename TyGroup, typename TyVal, typename TyOp>
inline auto reduce(const TyGroup &group, TyVal &&val, TyOp &&op)
    -> decltype(op(val, val)) {
  static_assert(kl_emu_impl::tile_size<TyGroup>::value != 0,
                "cg::reduce: the group must be a thread_block_tile");
  auto out = val;
  for (int mask = kl_emu_impl::tile_size<TyGroup>::value >> 1; mask > 0;
       mask >>= 1)
    out = op(out, group.shfl_xor(out, mask));
  return out;
}

} // namespace cooperative_groups

#endif /* KL_EMU_CG_REDUCE_SHIM_H */
