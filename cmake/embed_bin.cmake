# Writes binary file IN into OUT as `const unsigned char SYM[]` (64-byte
# aligned, as cuModuleLoadData wants an aligned image) plus
# `const unsigned long long SYM_size`.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR n "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
file(WRITE ${OUT} "/* generated from ${IN}; do not edit */\n"
     "__attribute__((aligned(64))) const unsigned char ${SYM}[] = {${hex}};\n"
     "const unsigned long long ${SYM}_size = ${n};\n")
