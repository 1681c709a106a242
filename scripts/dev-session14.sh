#!/usr/bin/env bash
# Session 14's device calls (run on the GPU machine from the repo root, binaries
# in gpu-bin). Why a small transfer beside a 2 MiB stream is slow on the host
# transports (60-90 us against 20-30 alone in session 13):
#   - kvlane_stream_bench's beside rows: tcp 4 KiB one at a time while another
#     agent streams 2 MiB WRITEs, against a plain socket echo beside a plain
#     2 MiB send loop (is the slowdown the kernel's loopback, or ours?); shm
#     against its own posts alone; once with the default lanes and once with
#     one lane per agent;
#   - lanebench tcp/shm mixed with the lane threads kept awake (--spin-us) and
#     with pinning off, against the defaults, alternately (LB_VARIANTS picks:
#     default spin pinoff onepeer bulk4k read);
# then, with CHECK=all, gpu-check (every gpu-labelled test, cuda_bench, the
# copier probe, lanebench on cuda). Everything lands in $OUT/$TAG.tar.gz.
#   usage: [TAG=s14] [ROUNDS=n] [CHECK=all|none] [LB=1|0] [LANES="2 1"] [STREAM_ARGS=..]
#          [LB_VARIANTS="default spin pinoff"] [LB_SHAPE=mixed|single|all]
#          bash scripts/dev-session14.sh
set -u
export LD_LIBRARY_PATH=$PWD/gpu-bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
TAG=${TAG:-s14}
G=$OUT/$TAG; mkdir -p $G
finish() { tar -C $OUT -czf $OUT/$TAG.tar.gz $TAG && rm -rf $G; }
trap finish EXIT
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $G/gpus.txt
echo "host: $(nproc) CPUs; $(uptime)"
for r in $(seq 1 ${ROUNDS:-1}); do
  for lanes in ${LANES:-2 1}; do
    name=stream-beside-lanes$lanes-$r
    timeout 300 gpu-bin/kvlane_stream_bench --bulk-mib 0 --latency-count 1000 \
      --beside-count 2000 --trials 5 --lanes $lanes ${STREAM_ARGS:-} \
      --json $G/$name.json > $G/$name.txt 2>&1
    echo "$name rc=$?"; grep -E "^(tcp|shm|case)" $G/$name.txt
  done
done
if [ "${LB:-1}" = 1 ]; then
  for r in $(seq 1 ${ROUNDS:-1}); do
    for tr in tcp shm; do
      for v in ${LB_VARIANTS:-default spin pinoff}; do
        case $v in
          default) a="" ;;
          spin) a="--spin-us 20000" ;;
          pinoff) a="--pin off" ;;
          onepeer) a="--mixed-peers 1" ;;  # two lanes of one target process
          bulk4k) a="--bulk-bytes 4096" ;;  # "bulk" as small as the small one
          read) a="--mixed-op read" ;;
          noidle) a="--idle-us 0" ;;  # session 13's behaviour
        esac
        name=lb-$tr-$v-$r
        timeout -k 10 300 gpu-bin/lanebench --transport $tr --shape ${LB_SHAPE:-mixed} $a \
          --json $G/$name.json > $G/$name.txt 2>&1
        echo "$name rc=$?"
        grep -E "small p(50|99)|^ +p(50|99)|verified:|^  (global|indep)|isolation" $G/$name.txt
      done
    done
  done
fi
if [ "${CHECK:-none}" = all ]; then
  LANEBENCH_RUNS="cuda" OUT=$G/check bash scripts/gpu-check.sh gpu-bin > $G/gpu-check.txt 2>&1
  tail -14 $G/gpu-check.txt
fi
echo done
