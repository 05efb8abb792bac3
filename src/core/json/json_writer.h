// A small pretty-printing JSON writer (the resolved config, checkpoint
// manifests, progress reports): keys in the order they
// are written, integers printed exactly, doubles in their shortest
// round-trip form (integral doubles keep a ".0" so they read as real).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ds::json {

// Shortest text that reads back to exactly `v` ("0.001", "1e-08", "0.9").
std::string format_number(double v);

// Appends `s` as a JSON string: quoted, with '"' and '\\' escaped, \n \r \t
// \b \f as such and other control characters as \u00XX.
void append_quoted(std::string& out, std::string_view s);

class JsonWriter {
public:
    // Objects and arrays; `key` is used inside an object, ignored in an array.
    // Arrays hold scalars only and print on one line.
    void begin_object(std::string_view key = {});
    void end_object();
    void begin_array(std::string_view key = {});
    void end_array();
    // begin_object(key), body(), end_object(); and the same for an array.
    template <class F>
    void object(std::string_view key, F&& body) {
        begin_object(key);
        body();
        end_object();
    }
    template <class F>
    void array(std::string_view key, F&& body) {
        begin_array(key);
        body();
        end_array();
    }

    void value(std::string_view key, bool v);
    void value(std::string_view key, int64_t v);
    void value(std::string_view key, double v);
    void value(std::string_view key, std::string_view v);
    void value(std::string_view key, const char* v) { value(key, std::string_view(v)); }
    void null(std::string_view key);
    // Already-serialised JSON (compact), e.g. opaque optimizer params.
    void raw(std::string_view key, std::string_view json);

    template <class T>
    void optional(std::string_view key, const std::optional<T>& v) {
        if (v)
            value(key, *v);
        else
            null(key);
    }

    std::string str() const { return out_ + "\n"; }

private:
    void prefix(std::string_view key);
    void open(std::string_view key, bool is_object);
    void close();

    std::string out_;
    struct Level {
        bool is_object;
        bool empty;
    };
    std::vector<Level> stack_;
};

}  // namespace ds::json
