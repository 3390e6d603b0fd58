#!/bin/bash
# Builds what a GPU machine WITHOUT network needs to run a real vLLM 0.26.0 and specmon, on a
# machine WITH PyPI access (any CPU: nothing is compiled). See README.md here.
#
#   bash benchmarks/gpu_vllm/build_bundle.sh BUNDLE_DIR STAGE_REPO
#
# BUNDLE_DIR: a work folder (downloads ~330 MB). STAGE_REPO: the checkout that the device call
# sends; three folders are written there and must be ignored (.git/info/exclude):
#   .gpu1/ site.tar.xz.part1                    (56 MiB: carried alone by the first call)
#   .gpu2/ site.tar.xz.part2, SHA256SUMS, swhl/ (specmon's missing wheels)
#   .gpus/ src/specmon (this checkout's, themes inside), benchmarks/{chat_render.py,gpu_vllm/}
# Each call's carried paths plus the checkout itself must stay under 64 MiB, hence 56 MiB parts.
set -euo pipefail
W=$(realpath -m "${1:?BUNDLE_DIR}"); REPO=$(realpath "${2:?STAGE_REPO}")
HERE=$(cd "$(dirname "$0")" && pwd); SRC=$(cd "$HERE/../.." && pwd)
mkdir -p "$W/deps" "$W/swhl"; cd "$W"
PIP="python3 -m pip --isolated"   # --isolated: ignore local mirrors and constraints
PLAT="--only-binary=:all: --python-version 3.12 --implementation cp \
 --platform manylinux_2_34_x86_64 --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 \
 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux_2_24_x86_64 \
 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
# 1. vLLM 0.26.0 (303,698,761 B; a CUDA 13 build pinning torch==2.11.0, the machine's torch)
[ -f vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl ] || $PIP download --no-deps $PLAT -d . vllm==0.26.0
# 2. vLLM's runtime dependencies that the machine lacks, pinned to its release date (76 pins)
$PIP download -q --no-deps $PLAT -d deps -r "$HERE/carry-specs.txt"
# 3. specmon's dependencies that the machine lacks (the vLLM bundle brings openai and pydantic)
$PIP download -q --no-deps $PLAT -d swhl textual==8.2.8 wcwidth==0.2.13 mdit-py-plugins==0.7.0 platformdirs==4.14.8 \
  linkify-it-py==2.2.0 uc-micro-py==2.0.0 rich==15.0.0 textual-serve==1.1.3 aiohttp-jinja2==1.6
# 4. one site tree: the deps, vLLM pruned (FA2 = the Ampere path, the Rust frontend, FlashMLA,
#    the MoE kernels, deep_gemm for other Pythons), and a stub xgrammar (imported at module
#    level by 0.26.0; structured output is not used)
rm -rf site && $PIP install -q --no-index --no-deps --no-compile --target site $PLAT deps/*.whl
unzip -q vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl -d site
rm -f site/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so site/vllm/vllm-rs site/vllm/_flashmla_C.abi3.so \
      site/vllm/_flashmla_extension_C.abi3.so site/vllm/_moe_C_stable_libtorch.abi3.so \
      site/vllm/third_party/deep_gemm/_C.cpython-3{10,11,13,14}-x86_64-linux-gnu.so
mkdir -p site/xgrammar && cp "$HERE/xgrammar_stub/__init__.py" site/xgrammar/
(cd site && tar cf - --sort=name .) | xz -9 -T0 > site.tar.xz           # ~88 MB (427 MB unpacked)
# 5. stage into the checkout
rm -rf "$REPO/.gpu1" "$REPO/.gpu2" "$REPO/.gpus"; mkdir -p "$REPO/.gpu1" "$REPO/.gpu2" "$REPO/.gpus/benchmarks"
split -b 58720256 -d -a 1 site.tar.xz site.tar.xz.p
mv site.tar.xz.p0 "$REPO/.gpu1/site.tar.xz.part1"; mv site.tar.xz.p1 "$REPO/.gpu2/site.tar.xz.part2"
(cd "$REPO" && sha256sum .gpu1/site.tar.xz.part1 .gpu2/site.tar.xz.part2 | sed 's|\.gpu[12]/||') > "$REPO/.gpu2/SHA256SUMS"
cp -r swhl "$REPO/.gpu2/"
mkdir -p "$REPO/.gpus/src"; cp -r "$SRC/src/specmon" "$REPO/.gpus/src/"; cp -r "$SRC/themes" "$REPO/.gpus/src/specmon/themes"
cp "$SRC/benchmarks/chat_render.py" "$REPO/.gpus/benchmarks/"; cp -r "$HERE" "$REPO/.gpus/benchmarks/gpu_vllm"
find "$REPO/.gpus" -name __pycache__ -prune -exec rm -rf {} +
du -sb "$REPO/.gpu1" "$REPO/.gpu2" "$REPO/.gpus"
