# Makefile — the two set-up commands of README.md. The build itself is CMake.
#   make demo   the embedded default campaign on the CPU emulator: builds the
#               priming corpus, primes the small policy and runs exhaustive
#               search over the seed configurations (the baseline the
#               campaign is compared with) when they are missing, runs
#               lua/campaigns/quick.lua, writes the report of the campaign
#               next to the search
#   make test   every ctest test but the `slow` ones (priming the default
#               model: `cd build && ctest -L slow`), plus the unit and
#               integration tests under ASan/UBSan
.PHONY: demo test build deps clean

deps:
	bash scripts/deps.sh

build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build -j2

demo: build
	@test -d runs/corpus/train || ./build/kernlab corpus --out runs/corpus
	@test -f runs/policy.ckpt || ./build/kernlab prime --corpus runs/corpus/train --out runs/policy.ckpt
	@test -f runs/quick-exhaustive.h5 || ./build/kernlab search exhaustive lua/campaigns/quick.lua
	rm -f runs/quick.h5 runs/quick.ckpt
	./build/kernlab run lua/campaigns/quick.lua
	./build/kernlab report runs/quick.h5 runs/quick-exhaustive.h5 -o runs/quick.html
	@echo "report: runs/quick.html   (kernlab top runs/quick.h5 for the leaderboard)"

test: build
	cd build && ctest -LE slow --output-on-failure -j2
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKL_SANITIZE=ON >/dev/null
	cmake --build build-asan -j2
	cd build-asan && ctest -L unit --output-on-failure -j2
	# The CLI end to end against the ASan/UBSan build (leaks on error paths).
	# handle_segv=0: a candidate's SIGSEGV stays a plain crash in its worker
	# (ASan's handler would open files there and trap).
	cd build-asan && ASAN_OPTIONS=handle_segv=0:detect_leaks=1 \
	  ctest -L integration -LE slow --output-on-failure -j2

clean:
	rm -rf build build-asan
