#!/bin/bash
# specmon against a REAL vLLM 0.26.0 on a GPU machine that has no network (see README.md here).
# Runs ON the GPU machine, from the root of a folder laid out like the repository (src/specmon,
# benchmarks/): the carried scripts folder. Phases, each run by one device call:
#
#   bash benchmarks/gpu_vllm/run_on_device.sh stage1 PART1_DIR    # stage part 1, tiny models, env
#   bash benchmarks/gpu_vllm/run_on_device.sh setup PART2_DIR      # unpack vLLM, specmon's wheels
#   bash benchmarks/gpu_vllm/run_on_device.sh draft                # draft_model: parts 1, 2, 4
#   bash benchmarks/gpu_vllm/run_on_device.sh methods              # dflash, eagle3, synthetic, n0
#   bash benchmarks/gpu_vllm/run_on_device.sh host                 # specmon serve (host mode)
#
# Several phases may be named in one call ("setup DIR draft"). Results of each phase are packed
# into $OUT/<phase>.tgz (the device returns at most 8 files). vLLM servers bind 127.0.0.1 and
# run on CPUs 2.. (taskset); specmon's clients on CPUs 0,1: the 2 cores of the chat goal.
set -uo pipefail
ROOT=$(pwd)
G=$ROOT/benchmarks/gpu_vllm
STAGE=/tmp/stage SITE=/tmp/site SWHL=/tmp/swhl TINY=/tmp/tiny BIN=/tmp/bin
RESULTS=${OUT:-/tmp/out}
mkdir -p "$RESULTS" "$STAGE"
NCPU=$(nproc)
SERVER_CPUS=2-$((NCPU - 1))
CLIENT_CPUS=0,1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_LOGGING_LEVEL=INFO
export PYTHONPATH=$ROOT/src:$SWHL:$SITE
export XDG_STATE_HOME=/tmp/xdg-state XDG_CONFIG_HOME=/tmp/xdg-config XDG_CACHE_HOME=/tmp/xdg-cache
SPECMON=(python3 -m specmon)

say() { echo "== $(date -u +%H:%M:%S) $*"; }

pack() {  # pack one phase's folder into $OUT/<phase>.tgz
  tar czf "$RESULTS/$1.tgz" -C /tmp/res "$1" && ls -la "$RESULTS/$1.tgz"
}

health() {  # health PORT PID TIMEOUT_S: 0 once /health answers 200
  local i
  for i in $(seq 1 "$3"); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$1/health', timeout=2)" \
      2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 1
  done
  return 1
}

metrics() {  # metrics PORT FILE
  python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$1/metrics', timeout=5).read().decode())" \
    > "$2" 2>/dev/null
}

SERVER_PID=
start_server() {  # start_server NAME PORT SPEC_JSON|- EAGER(0|1) DIR: vLLM in its own session
  local name=$1 port=$2 spec=$3 eager=$4 dir=$5 args=()
  [ "$spec" != - ] && args+=(--speculative-config "$spec")
  [ "$eager" = 1 ] && args+=(--enforce-eager)
  say "start $name on :$port (eager=$eager) spec=$spec"
  echo "$spec" > "$dir/$name.spec.json"
  setsid taskset -c "$SERVER_CPUS" env PYTHONPATH=$SITE python3 -m vllm.entrypoints.openai.api_server \
    --model $TINY/target --served-model-name tiny --dtype bfloat16 --load-format dummy \
    --max-model-len 16384 --max-num-seqs 16 --gpu-memory-utilization 0.3 \
    --host 127.0.0.1 --port "$port" "${args[@]}" > "$dir/$name.server.log" 2>&1 &
  SERVER_PID=$!
  echo $SERVER_PID > /tmp/server.pid   # for a caller that must stop it after a timeout
  local t0=$SECONDS
  if health "$port" $SERVER_PID 300; then
    say "$name up after $((SECONDS - t0)) s"; echo "$((SECONDS - t0))" > "$dir/$name.startup_s"; return 0
  fi
  say "$name did NOT come up"; tail -40 "$dir/$name.server.log"; stop_server; return 1
}

stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill -TERM -- -"$SERVER_PID" 2>/dev/null
  for _ in $(seq 1 20); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- -"$SERVER_PID" 2>/dev/null
  SERVER_PID=
  rm -f /tmp/server.pid
  sleep 2
}

sse() {  # sse PORT FILE: one raw streamed chat completion (usage in every chunk)
  python3 - "$1" "$2" <<'EOF'
import json, sys, urllib.request
port, out = sys.argv[1], sys.argv[2]
body = {"model": "tiny", "messages": [{"role": "user", "content": "Say something."}],
        "max_tokens": 64, "temperature": 0, "stream": True, "ignore_eos": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                             data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=60) as r, open(out, "wb") as f:
    f.write(r.read())
EOF
}

bench_and_watch() {  # bench_and_watch NAME PORT DIR OUTPUT_LEN [extra bench args]: part 1 per server
  local name=$1 port=$2 dir=$3 olen=$4; shift 4
  metrics "$port" "$dir/$name.metrics-before.txt"
  "${SPECMON[@]}" watch --attach "http://127.0.0.1:$port" --once --json > "$dir/$name.watch-idle.json" 2> "$dir/$name.watch-idle.err"
  taskset -c $CLIENT_CPUS "${SPECMON[@]}" bench --attach "http://127.0.0.1:$port" --num-prompts 8 --warmups 1 \
    --input-len 64 --output-len "$olen" --ignore-eos --gpu local --json "$dir/$name.bench.json" \
    --label "$name" "$@" > "$dir/$name.bench.txt" 2>&1 &
  local b=$!
  sleep 6
  "${SPECMON[@]}" watch --attach "http://127.0.0.1:$port" --once --json > "$dir/$name.watch-during.json" 2> "$dir/$name.watch-during.err"
  wait $b; echo "bench rc=$?" >> "$dir/$name.bench.txt"
  metrics "$port" "$dir/$name.metrics-after.txt"
  "${SPECMON[@]}" watch --attach "http://127.0.0.1:$port" --once --json > "$dir/$name.watch-after.json" 2> "$dir/$name.watch-after.err"
  sse "$port" "$dir/$name.chat.sse"
  python3 "$G/summarize.py" point "$dir" "$name"
}

phase_stage1() {  # stage1 PART1_DIR
  local d=/tmp/res/stage1; mkdir -p $d
  cp "$1"/site.tar.xz.part1 $STAGE/
  python3 "$G/make_tiny_models.py" --out $TINY --weights none > $d/tiny.log 2>&1 || tail $d/tiny.log
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nproc; uname -r; python3 --version
    echo "tmux: $(command -v tmux || echo none)  xz: $(command -v xz || echo none)  curl: $(command -v curl || echo none)"
    python3 -c "import torch,transformers,tokenizers,rich,markdown_it,aiohttp,jinja2,pynvml,httpx;print('torch',torch.__version__,'transformers',transformers.__version__,'tokenizers',tokenizers.__version__,'rich',rich.__version__ if hasattr(rich,'__version__') else '?','markdown_it',markdown_it.__version__,'aiohttp',aiohttp.__version__,'jinja2',jinja2.__version__,'httpx',httpx.__version__)"
    ls $TINY
  } 2>&1 | tee $d/env.txt
  pack stage1
}

phase_setup() {  # setup PART2_DIR
  local d=/tmp/res/setup; mkdir -p $d
  local src; src=$(realpath "$1")
  cp "$src"/site.tar.xz.part2 $STAGE/
  (cd $STAGE && sha256sum -c "$src/SHA256SUMS") || { echo "checksum failed"; exit 3; }
  if [ ! -f $SITE/.done ]; then
    mkdir -p $SITE
    if command -v xz > /dev/null; then
      cat $STAGE/site.tar.xz.part1 $STAGE/site.tar.xz.part2 | xz -d -T0 | tar -x -C $SITE && touch $SITE/.done
    else
      cat $STAGE/site.tar.xz.part1 $STAGE/site.tar.xz.part2 | python3 -c \
        "import sys,tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('$SITE')" && touch $SITE/.done
    fi
  fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SWHL "$src"/swhl/*.whl
  mkdir -p $BIN
  printf '#!%s\nimport sys\nsys.path.insert(0, "%s")\nfrom vllm.entrypoints.cli.main import main\nif __name__ == "__main__":\n    sys.exit(main())\n' \
    "$(command -v python3)" "$SITE" > $BIN/vllm && chmod +x $BIN/vllm
  {
    du -sh $SITE $SWHL
    env PYTHONPATH=$SITE python3 -c "import vllm; from vllm.vllm_flash_attn.flash_attn_interface import FA3_AVAILABLE as f; print('vllm', vllm.__version__, 'FA3', f)"
    "${SPECMON[@]}" --version
    python3 -c "import specmon,textual; print(specmon.__file__, 'textual', textual.__version__)"
  } 2>&1 | tee $d/setup.txt
  pack setup
}

phase_draft() {  # draft_model = the target's own weights, K=4, CUDA graphs: parts 1, 2 and 4
  local d=/tmp/res/draft port=8201; mkdir -p $d
  nvidia-smi > $d/nvidia-smi-idle.txt 2>&1
  start_server dm $port '{"method":"draft_model","model":"'$TINY'/target","num_speculative_tokens":4}' 0 $d || { pack draft; return; }
  metrics $port $d/dm.metrics-fresh.txt
  # part 1 + part 4 (the bench is recorded: the shipped recording)
  bench_and_watch dm $port $d 512 --record $d/dm.bench.ndjson.gz
  # part 2a: specmon chat's lag and CPU at the real rate, on 2 cores
  say "chat lag"
  CHAT_LAG_DUMP=$d taskset -c $CLIENT_CPUS python3 "$G/chat_lag.py" --url http://127.0.0.1:$port --max-tokens 8000 --rounds 3 \
    --svg $d/chat-dm.svg --out $d/chat_lag.txt > $d/chat_lag.log 2>&1; echo "chat_lag rc=$?" >> $d/chat_lag.log
  tail -5 $d/chat_lag.log
  # part 2b: specmon bench against vllm bench serve, same prompts and flags, alternating
  say "bench vs vllm bench serve"
  python3 "$G/summarize.py" prompts $d 12 512
  local r
  for r in 1 2; do
    for who in vllm specmon; do
      [ $r = 2 ] && who=$([ $who = vllm ] && echo specmon || echo vllm)
      metrics $port $d/cmp-$r-$who.m0.txt
      if [ $who = vllm ]; then
        taskset -c $CLIENT_CPUS python3 -m vllm.entrypoints.cli.main bench serve --backend openai-chat \
          --base-url http://127.0.0.1:$port --endpoint /v1/chat/completions --model tiny --tokenizer $TINY/target \
          --dataset-name sharegpt --dataset-path $d/prompts-sharegpt.json --disable-shuffle \
          --sharegpt-output-len 512 --num-prompts 12 --max-concurrency 1 --request-rate inf --temperature 0 \
          --ignore-eos --num-warmups 2 --disable-tqdm --save-result --save-detailed --result-dir $d \
          --result-filename cmp-$r-vllm.json > $d/cmp-$r-vllm.txt 2>&1
      else
        taskset -c $CLIENT_CPUS "${SPECMON[@]}" bench --attach http://127.0.0.1:$port --model tiny \
          --dataset $d/prompts-specmon.jsonl --num-prompts 12 --warmups 2 --concurrency 1 --temperature 0 \
          --ignore-eos --gpu none --json $d/cmp-$r-specmon.json > $d/cmp-$r-specmon.txt 2>&1
      fi
      echo "rc=$?" >> $d/cmp-$r-$who.txt
      metrics $port $d/cmp-$r-$who.m1.txt
    done
  done
  python3 "$G/summarize.py" compare $d
  grep -a -E "SpecDecoding|Avg prompt throughput" $d/dm.server.log | tail -6
  nvidia-smi > $d/nvidia-smi-load.txt 2>&1
  stop_server
  pack draft
}

phase_chat() {  # the draft_model server again: specmon chat's lag at its real rate, and concurrency 16
  local d=/tmp/res/chat port=8202; mkdir -p $d
  start_server dm $port '{"method":"draft_model","model":"'$TINY'/target","num_speculative_tokens":4}' 0 $d || { pack chat; return; }
  say "chat lag"
  CHAT_LAG_DUMP=$d taskset -c $CLIENT_CPUS python3 "$G/chat_lag.py" --url http://127.0.0.1:$port --max-tokens 4000 \
    --rounds 3 --temperature 0 --svg $d/chat-dm.svg --out $d/chat_lag.txt > $d/chat_lag.log 2>&1
  echo "chat_lag rc=$?" >> $d/chat_lag.log
  CHAT_LAG_DUMP=$d python3 "$G/chat_lag.py" --url http://127.0.0.1:$port --max-tokens 4000 --rounds 1 \
    --temperature 0 --out $d/chat_lag_16cpu.txt > $d/chat_lag_16cpu.log 2>&1
  cat $d/chat_lag.log $d/chat_lag_16cpu.log | grep -v "^|---"
  say "concurrency 16: vllm bench serve, then specmon bench"
  python3 "$G/summarize.py" prompts $d 48 512
  metrics $port $d/c16-vllm.m0.txt
  taskset -c $CLIENT_CPUS python3 -m vllm.entrypoints.cli.main bench serve --backend openai-chat \
    --base-url http://127.0.0.1:$port --endpoint /v1/chat/completions --model tiny --tokenizer $TINY/target \
    --dataset-name sharegpt --dataset-path $d/prompts-sharegpt.json --disable-shuffle \
    --sharegpt-output-len 512 --num-prompts 48 --max-concurrency 16 --request-rate inf --temperature 0 \
    --ignore-eos --num-warmups 2 --disable-tqdm --save-result --result-dir $d \
    --result-filename c16-vllm.json > $d/c16-vllm.txt 2>&1
  metrics $port $d/c16-vllm.m1.txt; metrics $port $d/c16-specmon.m0.txt
  taskset -c $CLIENT_CPUS "${SPECMON[@]}" bench --attach http://127.0.0.1:$port --model tiny \
    --dataset $d/prompts-specmon.jsonl --num-prompts 48 --warmups 2 --concurrency 16 --temperature 0 \
    --ignore-eos --gpu local --json $d/c16-specmon.json > $d/c16-specmon.txt 2>&1 &
  local b=$!; sleep 4
  "${SPECMON[@]}" watch --attach http://127.0.0.1:$port --once --json > $d/c16.watch-during.json 2>/dev/null
  wait $b
  metrics $port $d/c16-specmon.m1.txt
  grep -E "Output token throughput|Mean TPOT|Mean TTFT" $d/c16-vllm.txt
  grep -i -E "output tok|throughput" $d/c16-specmon.txt | head -4
  stop_server
  pack chat
}

phase_body() {  # c=1, 2 rounds: vllm bench serve (its own body), the same with specmon's stream_options,
                # specmon bench; server-side histograms before/after each; then specmon chat in tmux
  local d=/tmp/res/body port=8203; mkdir -p $d
  start_server dm $port '{"method":"draft_model","model":"'$TINY'/target","num_speculative_tokens":4}' 0 $d || { pack body; return; }
  python3 "$G/summarize.py" prompts $d 12 512
  local so='{"stream_options":{"include_usage":true,"continuous_usage_stats":true}}' r who
  for r in 1 2; do
    for who in vllm vllmso specmon; do
      [ $r = 2 ] && who=$(case $who in vllm) echo specmon;; specmon) echo vllm;; *) echo $who;; esac)
      metrics $port $d/cmp-$r-$who.m0.txt
      if [ $who = specmon ]; then
        taskset -c $CLIENT_CPUS "${SPECMON[@]}" bench --attach http://127.0.0.1:$port --model tiny \
          --dataset $d/prompts-specmon.jsonl --num-prompts 12 --warmups 2 --concurrency 1 --temperature 0 \
          --ignore-eos --gpu none --json $d/cmp-$r-specmon.json > $d/cmp-$r-specmon.txt 2>&1
      else
        local extra=(); [ $who = vllmso ] && extra=(--extra-body "$so")
        taskset -c $CLIENT_CPUS python3 -m vllm.entrypoints.cli.main bench serve --backend openai-chat \
          --base-url http://127.0.0.1:$port --endpoint /v1/chat/completions --model tiny --tokenizer $TINY/target \
          --dataset-name sharegpt --dataset-path $d/prompts-sharegpt.json --disable-shuffle \
          --sharegpt-output-len 512 --num-prompts 12 --max-concurrency 1 --request-rate inf --temperature 0 \
          --ignore-eos --num-warmups 2 --disable-tqdm --save-result --save-detailed --result-dir $d \
          --result-filename cmp-$r-$who.json "${extra[@]}" > $d/cmp-$r-$who.txt 2>&1
      fi
      metrics $port $d/cmp-$r-$who.m1.txt
    done
  done
  python3 "$G/summarize.py" compare3 $d
  say "specmon chat in tmux"
  tmux new-session -d -s c -x 140 -y 45 "cd $ROOT && ${SPECMON[*]} chat --attach http://127.0.0.1:$port; sleep 20"
  sleep 6; tmux send-keys -t c "Explain speculative decoding." Enter; sleep 8
  tmux capture-pane -p -t c > $d/tmux-chat.txt; tmux capture-pane -p -e -t c > $d/tmux-chat.ansi
  tmux send-keys -t c C-q; sleep 3; tmux kill-server 2>/dev/null
  head -30 $d/tmux-chat.txt
  stop_server
  pack body
}

phase_c16() {  # concurrency 16, 2 rounds in alternating order: vllm bench serve and specmon bench
  local d=/tmp/res/c16 port=8204 r who; mkdir -p $d
  start_server dm $port '{"method":"draft_model","model":"'$TINY'/target","num_speculative_tokens":4}' 0 $d || { pack c16; return; }
  python3 "$G/summarize.py" prompts $d 48 512
  for r in 1 2; do
    for who in vllm specmon; do
      [ $r = 2 ] && who=$([ $who = vllm ] && echo specmon || echo vllm)
      metrics $port $d/cmp-$r-$who.m0.txt
      if [ $who = vllm ]; then
        taskset -c $CLIENT_CPUS python3 -m vllm.entrypoints.cli.main bench serve --backend openai-chat \
          --base-url http://127.0.0.1:$port --endpoint /v1/chat/completions --model tiny --tokenizer $TINY/target \
          --dataset-name sharegpt --dataset-path $d/prompts-sharegpt.json --disable-shuffle \
          --sharegpt-output-len 512 --num-prompts 48 --max-concurrency 16 --request-rate inf --temperature 0 \
          --ignore-eos --num-warmups 2 --disable-tqdm --save-result --result-dir $d \
          --result-filename cmp-$r-vllm.json > $d/cmp-$r-vllm.txt 2>&1
      else
        taskset -c $CLIENT_CPUS "${SPECMON[@]}" bench --attach http://127.0.0.1:$port --model tiny \
          --dataset $d/prompts-specmon.jsonl --num-prompts 48 --warmups 2 --concurrency 16 --temperature 0 \
          --ignore-eos --gpu none --json $d/cmp-$r-specmon.json > $d/cmp-$r-specmon.txt 2>&1
      fi
      metrics $port $d/cmp-$r-$who.m1.txt
    done
  done
  python3 "$G/summarize.py" compare $d
  stop_server
  pack c16
}

phase_methods() {  # dflash, eagle3, synthetic AL 2.5, n_spec 0, synthetic low acceptance
  local d=/tmp/res/methods port=8210; mkdir -p $d
  local syn='"rejection_sample_method":"synthetic","synthetic_acceptance_length"'
  while read -r name eager spec; do
    port=$((port + 1))
    start_server "$name" $port "$spec" "$eager" $d || continue
    bench_and_watch "$name" $port $d 256
    grep -a "SpecDecoding" $d/$name.server.log | tail -2
    stop_server
  done <<EOF
dflash 0 {"method":"dflash","model":"$TINY/dflash","num_speculative_tokens":4}
eagle3 1 {"method":"eagle3","model":"$TINY/eagle3","num_speculative_tokens":3}
dflash_syn25 1 {"method":"dflash","model":"$TINY/dflash","num_speculative_tokens":4,$syn:2.5}
n0 1 -
dflash_syn105 1 {"method":"dflash","model":"$TINY/dflash","num_speculative_tokens":4,$syn:1.05}
EOF
  pack methods
}

phase_host() {  # specmon serve in host mode: startup phases, dashboard, clean stop
  local d=/tmp/res/host port=8301; mkdir -p $d
  mkdir -p $BIN
  printf '#!%s\nimport sys\nsys.path.insert(0, "%s")\nfrom vllm.entrypoints.cli.main import main\nif __name__ == "__main__":\n    sys.exit(main())\n' \
    "$(command -v python3)" "$SITE" > $BIN/vllm && chmod +x $BIN/vllm
  export PATH=$BIN:$PATH
  local common=(serve --model $TINY/target --draft $TINY/dflash --method dflash --n-spec 4
    --vllm $BIN/vllm --env VLLM_USE_FLASHINFER_SAMPLER=0)
  local vargs=(-- --load-format dummy --dtype bfloat16 --max-model-len 4096 --gpu-memory-utilization 0.3
    --served-model-name tiny)
  local args=("${common[@]}" --port $port --log-file $d/host-vllm.log --record $d/host.ndjson.gz "${vargs[@]}")
  "${SPECMON[@]}" "${common[@]}" --port $port --dry-run "${vargs[@]}" > $d/host-dry-run.txt 2>&1
  if [ "${HOST_PLAIN:-1}" = 1 ]; then
  say "host mode (plain output)"
  local t0=$SECONDS
  taskset -c $CLIENT_CPUS "${SPECMON[@]}" "${args[@]}" > $d/host.stdout 2> $d/host.stderr &
  local pid=$!
  health $port $pid 300 && say "host: /health after $((SECONDS - t0)) s"
  sleep 3
  sse $port $d/host.chat.sse
  sleep 4
  ps -eo pid,pgid,ppid,args | grep -E "vllm.entrypoints|bin/vllm|EngineCore|-m specmon" | grep -v grep > $d/ps-running.txt
  kill -INT $pid
  local t1=$SECONDS
  wait $pid; echo "specmon serve rc=$? stop took $((SECONDS - t1)) s" | tee $d/host-rc.txt
  sleep 2
  ps -eo pid,pgid,ppid,args | grep -E "vllm.entrypoints|bin/vllm|EngineCore|-m specmon" | grep -v grep > $d/ps-after.txt
  echo "processes left after stop: $(wc -l < $d/ps-after.txt)" | tee -a $d/host-rc.txt
  nvidia-smi --query-gpu=memory.used --format=csv,noheader | tee -a $d/host-rc.txt
  fi
  if command -v tmux > /dev/null; then
    say "host mode (app in tmux)"
    tmux new-session -d -s h -x 160 -y 48 \
      "cd $ROOT && ${SPECMON[*]} ${common[*]} --port $((port + 1)) --log-file $d/tmux-vllm.log ${vargs[*]}; sleep 30"
    for i in $(seq 1 "${TMUX_SNAPS:-12}"); do sleep 5; tmux capture-pane -p -t h > $d/tmux-$i.txt 2>/dev/null; done
    tmux send-keys -t h C-c; sleep 8; tmux capture-pane -p -t h > $d/tmux-end.txt 2>/dev/null
    tmux kill-server 2>/dev/null
  fi
  pack host
}

while [ $# -gt 0 ]; do
  phase=$1; shift
  case $phase in
    stage1|setup) arg=$1; shift; phase_$phase "$arg" ;;
    draft|chat|body|c16|methods|host) phase_$phase ;;
    *) echo "unknown phase $phase"; exit 2 ;;
  esac
done
stop_server
