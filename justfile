# streamfix recipes. `scripts/bootstrap --test` installs .venv (Python >= 3.12) with the
# test extras on first use; `just` itself is one of them (rust-just: .venv/bin/just).

py := `scripts/bootstrap --test 2>/dev/null || echo .venv/bin/python`

# list the recipes
default:
    @{{just_executable()}} --list

# run the sidecar (no args: demo in front of the replay upstream; --upstream URL for a real CPA)
run *ARGS:
    scripts/sidecar {{ARGS}}

# raw vs repaired, side by side, for every recording (starts and stops its own servers)
demo *ARGS:
    {{py}} -m streamfix.demo {{ARGS}}

# mitmweb with the addon and bodies kept, for interactive debugging
web *ARGS:
    scripts/sidecar --web {{ARGS}}

# the whole test suite (what CI runs)
test *ARGS:
    scripts/test {{ARGS}}

# only the in-process tests (tests/wire, tests/addons, tests/cli, tests/support: no process started)
unit *ARGS:
    {{py}} -m pytest -m "not e2e and not clients and not browser" {{ARGS}}

# benchmarks: repairer vs parse floor, mitmdump+addon vs passthrough (ratios)
bench *ARGS:
    {{py}} -m streamfix.bench {{ARGS}}

# the pressure suite, long form: 200 concurrent streams, 500 client aborts, upstream faults, garbage
pressure *ARGS:
    STREAMFIX_PRESSURE=long {{py}} -m pytest tests/e2e/test_pressure.py tests/addons/test_pressure_cycles.py -n 0 -p no:cacheprovider {{ARGS}}

# coverage-guided fuzzing (atheris) of the SSE parser and every repairer; libFuzzer options pass through
fuzz *ARGS:
    mkdir -p build/fuzz-corpus
    {{py}} tests/support/fuzz.py -artifact_prefix=build/ -rss_limit_mb=2048 {{ARGS}} build/fuzz-corpus

# list the recordings
recordings:
    {{py}} -m streamfix.recordings list

# repair one recording offline with mitmdump -nr (writes build/NAME.repaired.flow)
offline NAME:
    mkdir -p build
    {{py}} -m streamfix.recordings to-flow {{NAME}} build/{{NAME}}.flow
    .venv/bin/mitmdump -q -nr build/{{NAME}}.flow -s addons/repair.py --set streamfix_keep_bodies=true -w build/{{NAME}}.repaired.flow
    @echo "repaired flow: build/{{NAME}}.repaired.flow (open it: just web -- -r build/{{NAME}}.repaired.flow)"

# turn a saved flow (sidecar --keep-bodies, -w FILE) into recordings/NAME, secrets left out
capture FLOW NAME *ARGS:
    {{py}} -m streamfix.capture {{FLOW}} {{NAME}} {{ARGS}}

# where the CPA binaries are (STREAMFIX_CPA_BIN_DIR): every cell of the real-CPA matrix into
# recordings/real-cpa/ (provenance, request, raw stream, provider body), then docs/real-cpa.md's matrix
cpa-matrix *ARGS:
    {{py}} tests/support/realcpa_matrix.py capture {{ARGS}}
    {{py}} tests/support/realcpa_matrix.py docs

# where the CPA binaries are (STREAMFIX_CPA_BIN_DIR): every cell of the upstream-leg matrix into
# recordings/real-cpa-upstream/ (both legs: the provider calls and CPA's client response), for CI's replay
cpa-upstream-capture *ARGS:
    {{py}} tests/support/upstream_recordings.py capture {{ARGS}}

# sum a turn log (--set streamfix_log=PATH) per key, model and day
usage *PATHS:
    {{py}} -m streamfix.usage {{PATHS}}

# replay upstream alone (port 18317)
replay *ARGS:
    {{py}} -m streamfix.replay {{ARGS}}

# real clients x recordings, raw vs repaired (--ablate: which client catches each rule; --write-docs)
clients *ARGS:
    scripts/install-clients
    {{py}} tests/support/clients/harness.py {{ARGS}}

# the workers' benchmark: the capacity ladder of 1 and 2 streamfix workers and 2 passthrough workers behind HAProxy
bench-workers *ARGS:
    {{py}} -m streamfix.bench.capacity_workers {{ARGS}}

# what the Redis round trips of the shared correlation cost per turn (latency; --instructions: callgrind)
bench-redis *ARGS:
    {{py}} -m streamfix.bench.sharedstate {{ARGS}}
