#!/usr/bin/env bash
# Session 12's device call (run on the GPU machine from the repo root, binaries
# in gpu-bin): gpu-check (every gpu-labelled test, cuda_bench, the copier probe,
# lanebench on cuda and tcp), then kvbench over tcp with the pool in host memory
# and in device memory (staged through pinned host halves), alternating, ROUNDS
# times (default 2): device pools with each --staging-copy (batch, the default, and
# kernel) and a device pool on rank 0 only (--memory cuda,host). Everything lands
# in $OUT/$TAG.tar.gz.
# CHECK=tests runs only the tcp staging tests and the copier probe instead of
# gpu-check; CHECK=probe the copier probe's contention variants and those tests. KV_ARGS adds arguments to every kvbench run (e.g. another workload);
# AB names a second kvbench binary in gpu-bin whose device-pool run goes beside
# this tree's.
#   usage: [TAG=s12] [ROUNDS=n] [GRID=quick] [CHECK=all|tests|probe|none] [KV_ARGS=..] [AB=bin]
#          bash scripts/dev-session12.sh
set -u
# Debian shared libraries the binaries need, carried beside them.
export LD_LIBRARY_PATH=$PWD/gpu-bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
TAG=${TAG:-s12}
G=$OUT/$TAG; mkdir -p $G
finish() { tar -C $OUT -czf $OUT/$TAG.tar.gz $TAG && rm -rf $G; }
trap finish EXIT
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $G/gpus.txt
if [ "${CHECK:-all}" = all ]; then
  LANEBENCH_RUNS="cuda tcp" OUT=$G/check bash scripts/gpu-check.sh gpu-bin > $G/gpu-check.txt 2>&1
  tail -12 $G/gpu-check.txt
  for v in "--procs 2" "--busy 1"; do
    name=copier-probe$(echo "$v" | tr -d ' -')
    timeout 150 gpu-bin/cuda_copier_probe $v > $G/$name.txt 2>&1
    echo "$name rc=$?"; grep -E "verify|ALL|SOME" $G/$name.txt | sort | uniq -c
  done
elif [ "${CHECK:-all}" = probe ]; then
  # The copier alone, then beside other staging threads, another process on
  # the GPU, and SMs kept busy (see tests/gpu/copier_probe.cu).
  for v in "" "--threads 4" "--procs 2" "--busy 1"; do
    name=copier-probe$(echo "$v" | tr -d ' -')
    timeout 150 gpu-bin/cuda_copier_probe $v > $G/$name.txt 2>&1
    echo "$name rc=$?"; grep -E "^(engine|ref) |verify|ALL|SOME|probe" $G/$name.txt
  done
  timeout 180 gpu-bin/cuda_transfer_test --gtest_filter='*TcpStaged*' > $G/tcp-staged-test.txt 2>&1
  echo "tcp staged tests rc=$?"; grep -E "^\[  (PASSED|FAILED)" $G/tcp-staged-test.txt
elif [ "${CHECK:-all}" = tests ]; then
  timeout 180 gpu-bin/cuda_transfer_test --gtest_filter='*TcpStaged*' > $G/tcp-staged-test.txt 2>&1
  echo "tcp staged tests rc=$?"; grep -E "^\[  (PASSED|FAILED)" $G/tcp-staged-test.txt
  timeout 120 gpu-bin/cuda_copier_probe > $G/copier-probe.txt 2>&1
  echo "copier probe rc=$?"; cat $G/copier-probe.txt
  timeout 180 gpu-bin/kvbench_gpu_test > $G/kvbench-gpu-test.txt 2>&1
  echo "kvbench_gpu_test rc=$?"; grep -E "^\[  (PASSED|FAILED)" $G/kvbench-gpu-test.txt
fi
kv() {  # name, kvbench run args...
  local name=$1; shift
  timeout 300 gpu-bin/${KVBIN:-kvbench} run --grid ${GRID:-quick} --out $G/kv-$name ${KV_ARGS:-} "$@" \
    > $G/kv-$name.txt 2>&1
  echo "kvbench $name rc=$?"
  grep -E "outcome|GB/s|gbps" $G/kv-$name.txt | tail -4
}
for i in $(seq 1 ${ROUNDS:-2}); do
  kv tcp-host-$i --transport tcp --memory host
  [ -n "${AB:-}" ] && KVBIN=$AB kv tcp-cuda-$AB-$i --transport tcp --memory cuda
  kv tcp-cuda-$i --transport tcp --memory cuda
  kv tcp-cuda-kernel-$i --transport tcp --memory cuda --staging-copy kernel
  kv tcp-cuda-host-$i --transport tcp --memory cuda,host
done
[ -z "${AB:-}" ] && kv cuda-1 --transport cuda
echo done
