# Writes file IN as a NUL-terminated C string named SYM into OUT.
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
file(WRITE ${OUT} "/* generated from ${IN}; do not edit */\nconst char ${SYM}[] = {${hex} 0x00};\n")
