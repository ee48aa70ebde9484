# Makefile — the two set-up commands of README.md. The build itself is CMake.
#   make demo   the embedded default: every seed kernel through `kernlab eval`
#               on the CPU emulator, printing the table
#   make test   everything ctest runs, plus the unit tests under ASan/UBSan
.PHONY: demo test build deps clean

deps:
	bash scripts/deps.sh

build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build -j2

demo: build
	./build/kernlab eval kernels/seeds/*.cu

test: build
	cd build && ctest --output-on-failure -j2
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKL_SANITIZE=ON >/dev/null
	cmake --build build-asan -j2
	cd build-asan && ctest -L unit --output-on-failure -j2

clean:
	rm -rf build build-asan
