#!/usr/bin/env bash
# Session 13's device call (run on the GPU machine from the repo root, binaries
# in gpu-bin): the host transports on the GPU machine's quiet cores, each
# figure beside a reference from the same process:
#   - kvlane_stream_bench's latency rows: tcp and shm 4 KiB one at a time, the
#     post sent by the posting thread (AgentOptions::post_inline_bytes, the
#     default) and by the lane's thread (0), vs a blocking socket echo;
#   - lanebench on tcp and shm with --post-inline-bytes 0 and with the default,
#     alternately (ROUNDS times, default 1);
# then, with CHECK=all (the default), gpu-check (every gpu-labelled test,
# cuda_bench, the copier probe, lanebench on cuda). Everything lands in
# $OUT/$TAG.tar.gz.
#   usage: [TAG=s13] [ROUNDS=n] [CHECK=all|none] [LB_ARGS=..] [LB_INLINE="0 -1"]
#          [STREAM_AB="bin .."] [STREAM_ROUNDS=n] bash scripts/dev-session13.sh
set -u
export LD_LIBRARY_PATH=$PWD/gpu-bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
TAG=${TAG:-s13}
G=$OUT/$TAG; mkdir -p $G
finish() { tar -C $OUT -czf $OUT/$TAG.tar.gz $TAG && rm -rf $G; }
trap finish EXIT
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $G/gpus.txt
echo "host: $(nproc) CPUs; $(uptime)"
# STREAM_AB names more kvlane_stream_bench builds in gpu-bin (e.g. kvlane_stream_bench_s13a):
# each runs after this tree's, alternately, STREAM_ROUNDS times (default 1).
for r in $(seq 1 ${STREAM_ROUNDS:-1}); do
  for b in kvlane_stream_bench ${STREAM_AB:-}; do
    timeout 300 gpu-bin/$b --bulk-mib 0 --latency-count ${LAT_COUNT:-2000} --trials 5 \
      --json $G/stream-latency-$b-$r.json > $G/stream-latency-$b-$r.txt 2>&1
    echo "stream latency $b round $r rc=$?"; grep -E "^(tcp|shm|case)" $G/stream-latency-$b-$r.txt | grep p50
  done
done
for i in $(seq 1 ${ROUNDS:-1}); do
  for tr in tcp shm; do
    for b in ${LB_INLINE:-0 -1}; do
      name=lb-$tr-inline$b-$i
      timeout -k 10 300 gpu-bin/lanebench --transport $tr --post-inline-bytes $b ${LB_ARGS:-} \
        --json $G/$name.json > $G/$name.txt 2>&1
      echo "$name rc=$?"
      grep -E "^(mixed|single)|small p(50|99)|^ +p(50|99)|verified:|^  (global|indep)" $G/$name.txt
    done
  done
done
if [ "${CHECK:-all}" = all ]; then
  LANEBENCH_RUNS="cuda" OUT=$G/check bash scripts/gpu-check.sh gpu-bin > $G/gpu-check.txt 2>&1
  tail -14 $G/gpu-check.txt
fi
echo done
