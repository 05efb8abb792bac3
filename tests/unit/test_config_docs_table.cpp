// docs/CONFIG.md's key table is generated from the field declarations
// (src/config/docs_table.cpp): this test fails when the table in the docs
// and the declarations differ, naming the first differing line. Run with
// DS_UPDATE_DOCS=1 to rewrite the table in place after changing a key.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "config/field_visitor.h"

namespace {

const char* const kBegin = "<!-- keys-table:begin (generated; tests/unit/test_config_docs_table.cpp) -->\n";
const char* const kEnd = "<!-- keys-table:end -->\n";

std::string docs_path() { return std::string(DS_TEST_DATA_DIR) + "/../../docs/CONFIG.md"; }

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// The first line where `a` and `b` differ, for the failure message.
std::string first_difference(const std::string& a, const std::string& b) {
    std::istringstream ia(a), ib(b);
    std::string la, lb;
    for (int n = 1;; ++n) {
        const bool ga = static_cast<bool>(std::getline(ia, la));
        const bool gb = static_cast<bool>(std::getline(ib, lb));
        if (!ga && !gb) return "";
        if (!ga || !gb || la != lb)
            return "table line " + std::to_string(n) + ":\n  docs:         " + (ga ? la : "(end)") +
                   "\n  declarations: " + (gb ? lb : "(end)");
    }
}

TEST(ConfigDocsTable, DocsTableMatchesTheDeclarations) {
    const std::string path = docs_path();
    std::string doc = read_file(path);
    ASSERT_FALSE(doc.empty()) << path;
    const size_t b = doc.find(kBegin);
    const size_t e = doc.find(kEnd);
    ASSERT_NE(b, std::string::npos) << path << ": no keys-table begin marker";
    ASSERT_NE(e, std::string::npos) << path << ": no keys-table end marker";
    ASSERT_LT(b, e);
    const size_t start = b + std::string(kBegin).size();
    const std::string in_docs = doc.substr(start, e - start);
    const std::string generated = ds::config::detail::keys_table_markdown();
    if (in_docs != generated && std::getenv("DS_UPDATE_DOCS")) {
        doc.replace(start, e - start, generated);
        std::ofstream(path, std::ios::binary) << doc;
        GTEST_SKIP() << "rewrote the key table of " << path;
    }
    EXPECT_TRUE(in_docs == generated) << path << " differs from the field declarations at "
                                      << first_difference(in_docs, generated)
                                      << "\n(rerun with DS_UPDATE_DOCS=1 to regenerate the table)";
}

// Every key the parser reads has a row (the audit test's key list).
TEST(ConfigDocsTable, EveryClassifiedKeyHasARow) {
    const std::string table = ds::config::detail::keys_table_markdown();
    for (const std::string& k : ds::config::classified_keys())
        EXPECT_NE(table.find("| `" + k + "` |"), std::string::npos) << k;
}

}  // namespace
