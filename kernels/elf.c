/*
 * kernels/elf.c — finds one named symbol's initialised bytes in an ELF64
 * little-endian image, which is what NVRTC's sm_90 cubins are. The harness
 * uses it to read the `kl_launch` geometry constant without a GPU. Also
 * (kl_elf_load_time_code, at the end) tells whether a shared object runs
 * code of its own while it loads.
 *
 * Path: ELF header -> section header table -> the first SHT_SYMTAB and the
 * string table it links to -> the symbol whose name matches -> the section
 * it lives in -> its bytes. Every offset and size read from the image is
 * checked against the image size (and against its section) before use, with
 * overflow-safe arithmetic, so truncated or hostile input gives an error
 * and never a read outside [elf, elf + size).
 *
 * What it deliberately does not do: program headers, relocation targets,
 * symbol lookup by hash, big-endian or 32-bit ELF, extended section numbering
 * (more than 65279 sections), or copying: the returned pointer aims into the
 * caller's image.
 */
#include "kernels/kernels.h"

#include <stdio.h>
#include <string.h>

#define KL_EHDR_SIZE 64
#define KL_SHDR_SIZE 64
#define KL_SYM_SIZE 24
#define KL_SHT_SYMTAB 2
#define KL_SHT_STRTAB 3
#define KL_SHT_NOBITS 8
#define KL_ET_REL 1
#define KL_SHN_LORESERVE 0xff00

/* One section header, the fields this reader uses. */
typedef struct kl_shdr {
  uint32_t type, link;
  uint64_t addr, offset, size, entsize;
} kl_shdr;

static uint16_t kl_u16(const uint8_t *p) {
  return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t kl_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static uint64_t kl_u64(const uint8_t *p) {
  return (uint64_t)kl_u32(p) | (uint64_t)kl_u32(p + 4) << 32;
}

/* 1 if [off, off + len) lies inside [0, size), without overflow. */
static int kl_in_range(uint64_t off, uint64_t len, uint64_t size) {
  return off <= size && len <= size - off;
}

static int kl_elf_fail(char *why, size_t whylen, const char *msg,
                       const char *name) {
  if (why && whylen)
    snprintf(why, whylen, "ELF image: %s%s%s", msg, name ? " " : "",
             name ? name : "");
  return KL_EINPUT;
}

/* Reads section header i (i < shnum was checked by the caller, and the whole
 * table lies inside the image). */
static kl_shdr kl_section(const uint8_t *img, uint64_t shoff,
                          uint64_t shentsize, unsigned i) {
  const uint8_t *p = img + shoff + (uint64_t)i * shentsize;
  kl_shdr s;
  s.type = kl_u32(p + 4);
  s.addr = kl_u64(p + 16);
  s.offset = kl_u64(p + 24);
  s.size = kl_u64(p + 32);
  s.link = kl_u32(p + 40);
  s.entsize = kl_u64(p + 56);
  return s;
}

/* Checks the ELF64 little-endian header and that its section header table
 * lies inside the image. */
static int kl_section_table(const uint8_t *img, size_t size, uint64_t *shoff,
                            uint64_t *shentsize, unsigned *shnum, char *why,
                            size_t whylen) {
  if (!img || size < KL_EHDR_SIZE)
    return kl_elf_fail(why, whylen, "shorter than an ELF64 header", NULL);
  if (memcmp(img,
             "\x7f"
             "ELF",
             4) != 0)
    return kl_elf_fail(why, whylen, "no ELF magic", NULL);
  if (img[4] != 2 || img[5] != 1)
    return kl_elf_fail(why, whylen, "not ELF64 little-endian", NULL);
  *shoff = kl_u64(img + 40);
  *shentsize = kl_u16(img + 58);
  *shnum = kl_u16(img + 60);
  if (*shnum == 0 || *shentsize < KL_SHDR_SIZE)
    return kl_elf_fail(why, whylen, "no usable section header table", NULL);
  if (!kl_in_range(*shoff, (uint64_t)*shnum * *shentsize, size))
    return kl_elf_fail(why, whylen, "section header table out of bounds", NULL);
  return KL_OK;
}

/* Finds symbol `name` in the ELF64 little-endian image [elf, elf + size) and
 * points *data at its st_size initialised bytes inside its section (into
 * the caller's buffer; nothing is allocated). For relocatable images
 * st_value is the offset within the section; for executables (cubins) it is
 * an address, taken relative to the section's sh_addr. Returns KL_OK, or
 * KL_EINPUT with a reason in why for a malformed image, a missing symbol, or
 * a symbol without bytes (undefined, absolute, or in a SHT_NOBITS section). */
int kl_elf_symbol(const void *elf, size_t size, const char *name,
                  const void **data, size_t *data_len, char *why,
                  size_t whylen) {
  const uint8_t *img = elf;
  *data = NULL;
  *data_len = 0;

  uint64_t shoff, shentsize;
  unsigned shnum;
  int rc = kl_section_table(img, size, &shoff, &shentsize, &shnum, why, whylen);
  if (rc != KL_OK) return rc;
  uint16_t type = kl_u16(img + 16);

  /* The symbol table and the string table its sh_link names. */
  kl_shdr symtab = {0}, strtab;
  unsigned i;
  for (i = 0; i < shnum; i++) {
    symtab = kl_section(img, shoff, shentsize, i);
    if (symtab.type == KL_SHT_SYMTAB) break;
  }
  if (i == shnum) return kl_elf_fail(why, whylen, "no symbol table", NULL);
  if (symtab.entsize < KL_SYM_SIZE ||
      !kl_in_range(symtab.offset, symtab.size, size))
    return kl_elf_fail(why, whylen, "symbol table out of bounds", NULL);
  if (symtab.link == 0 || symtab.link >= shnum)
    return kl_elf_fail(why, whylen, "symbol table has no string table", NULL);
  strtab = kl_section(img, shoff, shentsize, symtab.link);
  if (strtab.type != KL_SHT_STRTAB ||
      !kl_in_range(strtab.offset, strtab.size, size))
    return kl_elf_fail(why, whylen, "string table out of bounds", NULL);

  const uint8_t *strs = img + strtab.offset;
  size_t namelen = strlen(name);
  uint64_t count = symtab.size / symtab.entsize;
  for (uint64_t k = 0; k < count; k++) {
    const uint8_t *sym = img + symtab.offset + k * symtab.entsize;
    uint32_t st_name = kl_u32(sym);
    /* The name plus its NUL must lie inside the string table. */
    if (!kl_in_range(st_name, (uint64_t)namelen + 1, strtab.size) ||
        memcmp(strs + st_name, name, namelen) != 0 ||
        strs[st_name + namelen] != '\0')
      continue;

    uint16_t shndx = kl_u16(sym + 6);
    uint64_t value = kl_u64(sym + 8);
    uint64_t st_size = kl_u64(sym + 16);
    if (shndx == 0)
      return kl_elf_fail(why, whylen, "symbol is undefined:", name);
    if (shndx >= KL_SHN_LORESERVE || shndx >= shnum)
      return kl_elf_fail(why, whylen, "symbol has no section:", name);
    kl_shdr sec = kl_section(img, shoff, shentsize, shndx);
    if (sec.type == KL_SHT_NOBITS)
      return kl_elf_fail(why, whylen,
                         "symbol has no initialised bytes (NOBITS):", name);
    if (!kl_in_range(sec.offset, sec.size, size))
      return kl_elf_fail(why, whylen, "symbol's section out of bounds:", name);
    uint64_t off = value;
    if (type != KL_ET_REL) {
      if (value < sec.addr)
        return kl_elf_fail(why, whylen, "symbol before its section:", name);
      off = value - sec.addr;
    }
    if (!kl_in_range(off, st_size, sec.size))
      return kl_elf_fail(why, whylen, "symbol extends past its section:", name);
    *data = img + sec.offset + off;
    *data_len = (size_t)st_size;
    return KL_OK;
  }
  return kl_elf_fail(why, whylen, "no symbol named", name);
}

/* ---- code a shared object runs while it loads or unloads ----
 * The emulator's host build of a candidate is dlopen'ed in a sandboxed
 * worker whose filter still lets the dynamic loader open files (read-only)
 * until the load is done. Whatever runs during the load runs under that
 * filter: constructors and dynamic initialisers (.init_array,
 * .preinit_array), an _init function (DT_INIT), and ifunc resolvers (run
 * to resolve IRELATIVE relocations and relocations against STT_GNU_IFUNC
 * symbols). Destructors (.fini_array, DT_FINI, DT_FINI_ARRAY) are refused
 * too: dlclose runs them, and a module refused before the worker tightened
 * its filter was closed under the loose one (the sandbox review: a
 * destructor read /proc/<lab>/environ and a key file, and sent them back
 * as the run's error text). A candidate's device code has none of these
 * on a device (NVRTC refuses dynamic initialisation of device variables),
 * and the emulator links without start files, so any of them is the
 * candidate's host code. */

#define KL_SHT_RELA 4
#define KL_SHT_DYNAMIC 6
#define KL_SHT_DYNSYM 11
#define KL_SHT_INIT_ARRAY 14
#define KL_SHT_FINI_ARRAY 15
#define KL_SHT_PREINIT_ARRAY 16
#define KL_DT_INIT 12
#define KL_DT_FINI 13
#define KL_DT_INIT_ARRAY 25
#define KL_DT_FINI_ARRAY 26
#define KL_DT_PREINIT_ARRAY 32
#define KL_STT_GNU_IFUNC 10
#define KL_EM_X86_64 62
#define KL_EM_AARCH64 183

int kl_elf_load_time_code(const void *elf, size_t size, char *why,
                          size_t whylen) {
  const uint8_t *img = elf;
  uint64_t shoff, shentsize;
  unsigned shnum;
  int rc = kl_section_table(img, size, &shoff, &shentsize, &shnum, why, whylen);
  if (rc != KL_OK) return rc;
  uint16_t machine = kl_u16(img + 18);
  uint32_t irelative = machine == KL_EM_X86_64    ? 37
                       : machine == KL_EM_AARCH64 ? 1032
                                                  : 0;
  for (unsigned i = 0; i < shnum; i++) {
    kl_shdr s = kl_section(img, shoff, shentsize, i);
    if ((s.type == KL_SHT_INIT_ARRAY || s.type == KL_SHT_PREINIT_ARRAY) &&
        s.size > 0)
      return kl_elf_fail(
          why, whylen, "a constructor or dynamic initialiser runs at load",
          s.type == KL_SHT_INIT_ARRAY ? "(.init_array)" : "(.preinit_array)");
    if (s.type == KL_SHT_FINI_ARRAY && s.size > 0)
      return kl_elf_fail(why, whylen, "a destructor runs at unload",
                         "(.fini_array)");
    if (s.type != KL_SHT_RELA && s.type != KL_SHT_DYNAMIC &&
        s.type != KL_SHT_SYMTAB && s.type != KL_SHT_DYNSYM)
      continue;
    if (!kl_in_range(s.offset, s.size, size))
      return kl_elf_fail(why, whylen, "section out of bounds", NULL);
    const uint8_t *p = img + s.offset;
    if (s.type == KL_SHT_DYNAMIC) {
      for (uint64_t k = 0; k + 16 <= s.size; k += 16) {
        uint64_t tag = kl_u64(p + k);
        if (tag == KL_DT_INIT || tag == KL_DT_INIT_ARRAY ||
            tag == KL_DT_PREINIT_ARRAY)
          return kl_elf_fail(why, whylen, "an init function runs at load",
                             tag == KL_DT_INIT ? "(DT_INIT: _init)"
                                               : "(DT_INIT_ARRAY)");
        if (tag == KL_DT_FINI || tag == KL_DT_FINI_ARRAY)
          return kl_elf_fail(why, whylen, "a fini function runs at unload",
                             tag == KL_DT_FINI ? "(DT_FINI: _fini)"
                                               : "(DT_FINI_ARRAY)");
        if (tag == 0) break;
      }
    } else if (s.type == KL_SHT_RELA) {
      for (uint64_t k = 0; k + 24 <= s.size; k += 24)
        if (irelative && kl_u32(p + k + 8) == irelative)
          return kl_elf_fail(why, whylen, "an ifunc resolver runs at load",
                             "(IRELATIVE relocation)");
    } else {
      for (uint64_t k = 0; k + KL_SYM_SIZE <= s.size; k += KL_SYM_SIZE)
        if ((p[k + 4] & 0xf) == KL_STT_GNU_IFUNC)
          return kl_elf_fail(why, whylen, "an ifunc resolver runs at load",
                             "(STT_GNU_IFUNC symbol)");
    }
  }
  return KL_OK;
}

/* ---- what a shared object imports ----
 * Every symbol the dynamic loader binds for a shared object is an undefined
 * entry of its .dynsym (weak ones too: bound when the process has them).
 * The emulator's host build of a device kernel may only import what device
 * code can call on a GPU; anything else (getenv, strtok, rand, fopen) is
 * host state or host I/O reached through a name NVRTC saw as a __device__
 * function of the candidate's own. This reads the table the linker wrote,
 * through the section headers: the candidate writes source, not the ELF
 * layout, so the two agree. */

int kl_elf_imports_allowed(const void *elf, size_t size,
                           int (*allowed)(const char *name),
                           const char **refused, char *why, size_t whylen) {
  const uint8_t *img = elf;
  *refused = NULL;
  uint64_t shoff, shentsize;
  unsigned shnum;
  int rc = kl_section_table(img, size, &shoff, &shentsize, &shnum, why, whylen);
  if (rc != KL_OK) return rc;
  for (unsigned i = 0; i < shnum; i++) {
    kl_shdr sy = kl_section(img, shoff, shentsize, i);
    if (sy.type != KL_SHT_DYNSYM) continue;
    if (sy.entsize < KL_SYM_SIZE || !kl_in_range(sy.offset, sy.size, size))
      return kl_elf_fail(why, whylen, "dynamic symbol table out of bounds",
                         NULL);
    if (sy.link == 0 || sy.link >= shnum)
      return kl_elf_fail(why, whylen,
                         "dynamic symbol table has no string table", NULL);
    kl_shdr st = kl_section(img, shoff, shentsize, sy.link);
    if (st.type != KL_SHT_STRTAB || !kl_in_range(st.offset, st.size, size))
      return kl_elf_fail(why, whylen, "dynamic string table out of bounds",
                         NULL);
    const char *strs = (const char *)img + st.offset;
    uint64_t count = sy.size / sy.entsize;
    for (uint64_t k = 1; k < count; k++) { /* entry 0 is the null symbol */
      const uint8_t *sym = img + sy.offset + k * sy.entsize;
      if (kl_u16(sym + 6) != 0) continue; /* defined here */
      uint32_t st_name = kl_u32(sym);
      if (st_name >= st.size ||
          !memchr(strs + st_name, '\0', (size_t)(st.size - st_name)))
        return kl_elf_fail(why, whylen, "dynamic symbol name out of bounds",
                           NULL);
      const char *name = strs + st_name;
      if (*name && !allowed(name)) {
        *refused = name;
        return KL_OK;
      }
    }
  }
  return KL_OK;
}
