#!/usr/bin/env bash
# Issue 19's GPU check in one command: the CUDA tests (pytest -m cuda), then the GPU benchmark; prints one JSON line
# {"tests": {...}, "bench": {...}} as its last line. Installs nothing from the network.
#
# The machine needs python3 with a CUDA build of torch. What it lacks (tensordict, pyvers, gymnasium, hydra) travels
# as wheels in a folder (default .whl/ at the repository root), prepared where pip can download:
#
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .whl \
#       tensordict==0.15.3 pyvers gymnasium==1.4.0 farama-notifications omegaconf==2.3.1 hydra-core==1.3.8
#   python3 -m pip wheel --no-deps -w .whl antlr4-python3-runtime==4.9.3
#
# Usage: bash benchmarks/gpu/run.sh [WHEEL_DIR]     (TEST_TIMEOUT=seconds, BENCH_ARGS="--only rb,sac" to narrow;
#        ALLOW_CPU=1 BENCH_ARGS="--small --only gae" for a dry run of the script itself on a machine without CUDA)
# Budget: under 8 minutes on one H100 (tests about 3, benchmark about 4).
set -uo pipefail
cd "$(dirname "$0")/../.."
WHEELS="${1:-.whl}"
OUT_DIR="${OUT:-/tmp/torchrl-gpu-run}"
mkdir -p "$OUT_DIR"
SITE=/tmp/torchrl-gpu-site
if compgen -G "$WHEELS/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl \
        || { echo '{"error": "wheel install failed"}'; exit 1; }
fi
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
python3 -c "import os, torch, tensordict, torchrl; assert torch.cuda.is_available() or os.environ.get('ALLOW_CPU'), 'no CUDA'" \
    || { echo '{"error": "torch with CUDA, tensordict and torchrl must import"}'; exit 1; }

# 1. the CUDA tests: every test generated for a CUDA device carries the "cuda" marker
timeout "${TEST_TIMEOUT:-240}" python3 -m pytest -q -m cuda -p no:cacheprovider -n 4 --timeout 120 \
    --junitxml "$OUT_DIR/cuda-tests.xml" test > "$OUT_DIR/cuda-tests.log" 2>&1
TEST_RC=$?
tail -n 25 "$OUT_DIR/cuda-tests.log" >&2

# 2. the benchmark (one JSON line, the last one it prints)
timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/gpu/bench_gpu.py ${BENCH_ARGS:-} > "$OUT_DIR/bench.json" 2> "$OUT_DIR/bench.log"
BENCH_RC=$?
tail -n 20 "$OUT_DIR/bench.log" >&2

python3 - "$OUT_DIR" "$TEST_RC" "$BENCH_RC" <<'EOF'
import json, sys, xml.etree.ElementTree as ET
out_dir, test_rc, bench_rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tests = {"rc": test_rc}
try:
    suite = ET.parse(f"{out_dir}/cuda-tests.xml").getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    tests.update({k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")})
    tests["failed"] = [f"{c.get('classname')}::{c.get('name')}" for c in suite.iter("testcase")
                       if c.find("failure") is not None or c.find("error") is not None][:30]
except Exception as err:
    tests["report"] = f"no junit report ({err})"
lines = [l for l in open(f"{out_dir}/bench.json").read().splitlines() if l.strip()]
try:
    bench = json.loads(lines[-1])
except Exception:
    bench = {"rc": bench_rc, "error": "no JSON line"}
print(json.dumps({"tests": tests, "bench": bench}))
EOF
