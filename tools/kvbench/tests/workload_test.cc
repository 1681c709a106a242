#include "workload.h"

#include <gtest/gtest.h>

namespace kvbench {
namespace {

Workload Dsv4(int block) {
  auto w = Workload::Make({"kv-dsv4", block, ""});
  EXPECT_TRUE(w.ok()) << w.status().message();
  return w.value();
}

const Group& Find(const Workload& w, const std::string& name) {
  for (const Group& g : w.groups()) {
    if (g.name == name) return g;
  }
  ADD_FAILURE() << "no group " << name;
  return w.groups().front();
}

TEST(Workload, Dsv4PinnedNumbersAtBlock256) {
  Workload w = Dsv4(256);
  EXPECT_EQ(Find(w, "c4a").page_bytes, 37440u);
  EXPECT_EQ(Find(w, "c4a").packed_bytes, 1123200u);
  EXPECT_EQ(w.RequestDescs(524288), 6146u);
}

TEST(Workload, Dsv4DescriptorsPerGroupAt512k) {
  std::vector<GroupDemand> d = Dsv4(256).Demand(524288);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].descs, 2048u);  // c4a: 524288 / 256
  EXPECT_EQ(d[1].descs, 2048u);  // c4a-idx
  EXPECT_EQ(d[2].descs, 2048u);  // c128a
  EXPECT_EQ(d[3].descs, 2u);     // swa: the last 128 tokens in 64-token blocks
}

TEST(Workload, Dsv4OtherGroupPages) {
  Workload w = Dsv4(256);
  EXPECT_EQ(Find(w, "c4a-idx").page_bytes, 8640u);  // 64 * 132 = 8448 -> 15 * 576
  EXPECT_EQ(Find(w, "c128a").page_bytes, 1728u);    // 2 * 584 = 1168 -> 3 * 576
  EXPECT_EQ(Find(w, "c128a").packed_bytes, 31u * 1728u);
  EXPECT_EQ(Find(w, "swa").block_tokens, 64);
  EXPECT_EQ(Find(w, "swa").page_bytes, 37440u);  // 64 * 584 = 37376 -> 65 * 576
  EXPECT_EQ(Find(w, "swa").packed_bytes, 61u * 37440u);
}

TEST(Workload, Dsv4RequestBytesAt8k) {
  // 32 blocks of (c4a + c4a-idx + c128a) plus 2 swa blocks.
  uint64_t per_block = 1123200 + 30 * 8640 + 31 * 1728;
  EXPECT_EQ(Dsv4(256).RequestBytes(8192), 32 * per_block + 2 * 61 * 37440ull);
}

TEST(Workload, Dsv4RejectsBlocksThatSplitAnHcaState) {
  for (int block : {64, 192, 100, -128}) {
    auto w = Workload::Make({"kv-dsv4", block, ""});
    ASSERT_FALSE(w.ok()) << block;
    EXPECT_NE(w.status().message().find("splits an HCA state"), std::string::npos);
  }
  EXPECT_TRUE(Workload::Make({"kv-dsv4", 128, ""}).ok());
  EXPECT_TRUE(Workload::Make({"kv-dsv4", 512, ""}).ok());
}

// Block 0 selects the model's production block: 256 tokens (DESIGN.md).
TEST(Workload, Dsv4BlockZeroIsTheProductionBlock) {
  auto w = Workload::Make({"kv-dsv4", 0, ""});
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->block(), 256);
  EXPECT_EQ(Find(*w, "c4a").page_bytes, 37440u);
}

TEST(Workload, SwaWindowCoversTheLastTokens) {
  EXPECT_EQ(BlocksFor(524288, 64, 128), 2u);
  EXPECT_EQ(BlocksFor(1000, 64, 128), 3u);  // tokens 872..999 span blocks 13..15
  EXPECT_EQ(BlocksFor(100, 64, 128), 2u);
  EXPECT_EQ(BlocksFor(64, 64, 128), 1u);
  EXPECT_EQ(BlocksFor(1000, 256, 0), 4u);
}

TEST(Workload, MlaIsPerLayerPerPage) {
  auto w = Workload::Make({"kv-mla", 64, "bf16"});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->groups()[0].page_bytes, 64u * 704 * 2);
  EXPECT_EQ(w->RequestDescs(8192), 61u * 128);
  EXPECT_EQ(w->RequestBytes(8192), 8192ull * 704 * 2 * 61);
  auto fp8 = Workload::Make({"kv-mla", 16, "fp8"});
  ASSERT_TRUE(fp8.ok());
  EXPECT_EQ(fp8->groups()[0].page_bytes, 16u * 704);
  EXPECT_FALSE(Workload::Make({"kv-mla", 32, "bf16"}).ok());
  EXPECT_FALSE(Workload::Make({"kv-mla", 64, "fp16"}).ok());
}

TEST(Workload, ContigIsOneDescriptorOfTheSameBytes) {
  auto c = Workload::Make({"contig", 256, ""});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->RequestDescs(32768), 1u);
  EXPECT_EQ(c->RequestBytes(32768), Dsv4(256).RequestBytes(32768));
  EXPECT_EQ(c->groups().size(), 1u);
}

TEST(Workload, UnknownNameFails) { EXPECT_FALSE(Workload::Make({"kv-foo", 0, ""}).ok()); }

// --dtype changes only kv-mla's pages: elsewhere it is refused rather than
// recorded as if it had been used; kv-mla's default is bf16.
TEST(Workload, DtypeIsRefusedWhereItChangesNothing) {
  for (const char* name : {"kv-dsv4", "contig"}) {
    for (const char* dtype : {"fp8", "bf16"}) {
      auto w = Workload::Make({name, 256, dtype});
      ASSERT_FALSE(w.ok()) << name << " " << dtype;
      EXPECT_EQ(w.status().message().rfind(
                    std::string(name) + ": --dtype " + dtype + " applies to kv-mla only", 0),
                0u)
          << w.status().message();
    }
    EXPECT_EQ(Workload::Make({name, 256, ""}).value().dtype(), "");
  }
  EXPECT_EQ(Workload::Make({"kv-mla", 64, ""}).value().dtype(), "bf16");
  EXPECT_EQ(Workload::Make({"kv-mla", 64, "fp8"}).value().dtype(), "fp8");
}

TEST(Workload, ContigBlockErrorNamesContig) {
  auto w = Workload::Make({"contig", 1, ""});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message().rfind("contig: block 1 ", 0), 0u) << w.status().message();
  EXPECT_EQ(Workload::Make({"kv-dsv4", 1, ""}).status().message().rfind("kv-dsv4: block 1 ", 0),
            0u);
}

}  // namespace
}  // namespace kvbench
