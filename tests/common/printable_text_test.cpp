#include <catch2/catch.hpp>

#include "longhaul/common/printable_text.h"
#include "longhaul/common/utf8.h"

using namespace longhaul;

TEST_CASE("PrintableTail keeps text printable and valid UTF-8, also where the cut splits a character",
          "[printable_text]") {
  CHECK(PrintableTail("ok\nline\ttab", 100) == "ok\nline\ttab");
  CHECK(PrintableTail("a\x1b[31mb\x7f", 100) == "a?[31mb?");
  // "é" is 2 bytes: a cut after its first byte leaves a lone continuation byte.
  const std::string text = "x\xc3\xa9\xc3\xa9";
  const std::string tail = PrintableTail(text, 3);
  CHECK(tail == "...?\xc3\xa9");
  CHECK(IsValidUtf8(tail));
  // Invalid sequences a program printed (found by fuzz/agent_control_fuzz: a
  // worker's failed report with such a message made the region's report
  // unparsable as protobuf).
  for (const std::string& bad : {std::string("\xff\xfe"), std::string("\xc0\xaf"), std::string("\xed\xa0\x80"),
                                std::string("ok\xe2\x82")}) {
    INFO(bad.size());
    CHECK(IsValidUtf8(PrintableTail(bad, 100)));
  }
  CHECK(PrintableTail("\xe2\x82\xac", 100) == "\xe2\x82\xac");  // the euro sign stays
  // C1 controls and bidi overrides a terminal would act on: one '?' per byte.
  CHECK(PrintableTail("a\xc2\x9b" "31mb", 100) == "a??31mb");
  CHECK(PrintableTail("x\xe2\x80\xaey", 100) == "x???y");
  CHECK(PrintableTail("\xc2\xa0", 100) == "\xc2\xa0");  // a no-break space stays
}
