#include "case_name.h"

#include <gtest/gtest.h>

namespace kvbench {
namespace {

TEST(CaseName, DefaultsNameWorkloadBlockAndPath) {
  EXPECT_EQ(DefaultCaseName({"kv-dsv4", 256, "", "shm", "", "", 0}), "kv-dsv4-b256-shm");
  EXPECT_EQ(DefaultCaseName({"kv-mla", 16, "bf16", "shm", "batch", "independent", 0}),
            "kv-mla-b16-shm");
}

// A kv-mla fp8 run used to replace a bf16 run's document (kv-mla-b16-shm.json both);
// likewise runs of either policy, or of another lane count.
TEST(CaseName, EverySettingOtherThanItsDefaultIsNamed) {
  EXPECT_EQ(DefaultCaseName({"kv-mla", 16, "fp8", "shm", "", "", 0}), "kv-mla-b16-fp8-shm");
  EXPECT_EQ(DefaultCaseName({"kv-dsv4", 256, "", "shm", "", "global-fifo", 0}),
            "kv-dsv4-b256-shm-global-fifo");
  EXPECT_EQ(DefaultCaseName({"kv-dsv4", 256, "", "shm", "", "", 4}), "kv-dsv4-b256-shm-lanes4");
  EXPECT_EQ(DefaultCaseName({"kv-mla", 16, "fp8", "tcp-cuda", "kernel", "global-fifo", 2}),
            "kv-mla-b16-fp8-tcp-cuda-kernel-global-fifo-lanes2");
}

}  // namespace
}  // namespace kvbench
