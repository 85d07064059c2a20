// The training examples on their real data, alone and under hmcrun (built-in inventory: four
// local ranks in two zones): results, JSON lines, checkpoints, and clear errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/testing/command.h"

namespace hmc {
namespace {

using ::testing::HasSubstr;

using testing_util::Outcome;
using testing_util::ReadFile;
using testing_util::RunCommand;
using testing_util::TempPath;

// The number after "key": in a JSON line.
double Field(absl::string_view json, absl::string_view key) {
  const std::string needle = absl::StrCat("\"", key, "\": ");
  const size_t at = json.find(needle);
  if (at == absl::string_view::npos) return -1;
  absl::string_view rest = json.substr(at + needle.size());
  double value = -1;
  EXPECT_TRUE(absl::SimpleAtod(rest.substr(0, rest.find_first_of(",}")), &value)) << json;
  return value;
}

std::vector<std::string> Lines(const std::string& path) {
  return absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty());
}

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

const std::vector<std::string> kSmallCv = {"--max_train_samples=2560", "--max_test_samples=1000",
                                           "--threads=1"};

std::vector<std::string> Cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(TrainCv, FourRanksUnderHmcrunTrainLikeOneProcessWithTheSameGlobalBatch) {
  const std::string alone_json = TempPath("alone.jsonl");
  const std::string group_json = TempPath("group.jsonl");
  Outcome alone = RunCommand(Cat({HMC_TRAIN_CV_PATH, "--json=" + alone_json}, kSmallCv));
  ASSERT_EQ(alone.code, 0) << alone.output;
  Outcome group =
      RunCommand(Cat({HMC_HMCRUN_PATH, HMC_TRAIN_CV_PATH, "--json=" + group_json}, kSmallCv));
  ASSERT_EQ(group.code, 0) << group.output;
  EXPECT_THAT(group.output, HasSubstr("[0 zone-a peer-a] epoch 1: 2560 samples"));
  const std::string one = Lines(alone_json).at(0), four = Lines(group_json).at(0);
  EXPECT_EQ(Field(four, "world"), 4);
  EXPECT_EQ(Field(four, "steps"), 20);
  // Same global batches in the same order: the same training up to rounding.
  EXPECT_NEAR(Field(four, "loss"), Field(one, "loss"), 2e-3) << one << "\n" << four;
  EXPECT_NEAR(Field(four, "test_accuracy"), Field(one, "test_accuracy"), 0.02);
  EXPECT_GT(Field(four, "test_accuracy"), 0.5);
  // Two zones: bytes crossed between them, at a price.
  EXPECT_GT(Field(four, "bytes_across_zones"), 0);
  EXPECT_GT(Field(four, "bytes_in_zones"), 0);
  EXPECT_GT(Field(four, "egress_usd"), 0);
}

TEST(TrainCv, ResumesFromItsCheckpoint) {
  const std::string checkpoint = TempPath("cv.pt");
  const std::string json = TempPath("resume.jsonl");
  std::remove(checkpoint.c_str());
  const std::vector<std::string> command = Cat({HMC_HMCRUN_PATH, "-np", "2", HMC_TRAIN_CV_PATH,
                                                "--checkpoint=" + checkpoint, "--json=" + json},
                                               kSmallCv);
  Outcome first = RunCommand(Cat(command, {"--epochs=1"}));
  ASSERT_EQ(first.code, 0) << first.output;
  Outcome second = RunCommand(Cat(command, {"--epochs=2"}));
  ASSERT_EQ(second.code, 0) << second.output;
  EXPECT_THAT(second.output, HasSubstr("resumed from " + checkpoint + " at epoch 2"));
  EXPECT_FALSE(absl::StrContains(second.output, "epoch 1:")) << second.output;
  const std::vector<std::string> lines = Lines(json);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(Field(lines[1], "epoch"), 2);
  // The second epoch continued from the first one's weights.
  EXPECT_LT(Field(lines[1], "loss"), Field(lines[0], "loss"));
}

TEST(TrainCv, CollaborativeOptimizerStepsWithTheGroup) {
  const std::string json = TempPath("collab.jsonl");
  Outcome run = RunCommand(Cat({HMC_HMCRUN_PATH, HMC_TRAIN_CV_PATH, "--json=" + json,
                                "--sync=collab", "--target_batch=256", "--batch=64"},
                               kSmallCv));
  ASSERT_EQ(run.code, 0) << run.output;
  const std::string line = Lines(json).at(0);
  EXPECT_EQ(Field(line, "steps"), 2560 / 256);
  EXPECT_GE(Field(line, "samples"), 2560);
}

TEST(TrainCv, MissingDataIsAClearError) {
  Outcome run = RunCommand({HMC_TRAIN_CV_PATH, "--data_dir=/nonexistent", "--json="});
  EXPECT_EQ(run.code, 1);
  EXPECT_THAT(run.output, HasSubstr("cannot open /nonexistent/train-images-idx3-ubyte.gz "
                                    "(Debian's dataset-fashion-mnist installs it)"));
}

TEST(TrainCv, CorruptDataIsAClearError) {
  const std::string dir = TempPath("fashion");
  const std::string images = dir + "/train-images-idx3-ubyte.gz";
  ASSERT_EQ(
      system(absl::StrCat("rm -rf ", dir, " && mkdir -p ", dir, " && cp ", kFashionMnist,
                          "/*labels* ", kFashionMnist, "/t10k-images* ", dir, " && head -c 100000 ",
                          kFashionMnist, "/train-images-idx3-ubyte.gz > ", images)
                 .c_str()),
      0);
  Outcome truncated = RunCommand({HMC_TRAIN_CV_PATH, "--data_dir=" + dir, "--json="});
  EXPECT_EQ(truncated.code, 1);
  EXPECT_THAT(truncated.output, HasSubstr(images + ": unexpected end of file"));
  // An IDX header of labels where images belong.
  ASSERT_EQ(
      system(absl::StrCat("printf '\\000\\000\\010\\001\\000\\000\\000\\000' | gzip > ", images)
                 .c_str()),
      0);
  Outcome wrong = RunCommand({HMC_TRAIN_CV_PATH, "--data_dir=" + dir, "--json="});
  EXPECT_EQ(wrong.code, 1);
  EXPECT_THAT(wrong.output, HasSubstr(images + ": magic 0x00000801, expected 0x00000803"));
}

TEST(TrainNlp, PerplexityFallsAndRanksAgree) {
  const std::string json = TempPath("nlp.jsonl");
  Outcome run =
      RunCommand({HMC_HMCRUN_PATH, "-np", "2", HMC_TRAIN_NLP_PATH, "--json=" + json, "--epochs=2",
                  "--steps_per_epoch=25", "--eval_windows=64", "--threads=1"});
  ASSERT_EQ(run.code, 0) << run.output;
  const std::vector<std::string> lines = Lines(json);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_LT(Field(lines[1], "perplexity"), Field(lines[0], "perplexity"));
  // Uniform over the bytes would be 256; a model that learned anything is far below.
  EXPECT_LT(Field(lines[1], "perplexity"), 40);
}

}  // namespace
}  // namespace hmc
