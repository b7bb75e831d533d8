// SPDX-License-Identifier: MIT
// llama.cpp's own JSON-Schema -> GBNF converter (common/json-schema-to-grammar.cpp, the function
// llama-server uses for response_format / json_schema), driven over a list of schemas. Built and
// linked against the same llama.cpp build as llama_grammar.c by bench/grammar_vs_llama.sh.
//
// usage: schema2gbnf LIST
//   LIST: one line per schema, "<schema.json>\t<out-prefix>". For each, writes <out-prefix>.gbnf
//   (the grammar) or <out-prefix>.err (why the conversion failed), and <out-prefix>.warn when the
//   converter printed a warning (it then widens the language, e.g. an unsupported pattern becomes
//   "any string"). Prints one line per schema: "<out-prefix>\tok|err|warn\t<convert ms>".
#include "json-schema-to-grammar.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

static bool write_file(const std::string & path, const std::string & text)
{
    std::ofstream f(path, std::ios::binary);
    f << text;
    return (bool)f;
}

int main(int argc, char ** argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: schema2gbnf LIST\n");
        return 2;
    }
    std::ifstream list(argv[1]);
    if (!list) {
        fprintf(stderr, "schema2gbnf: cannot read %s\n", argv[1]);
        return 1;
    }
    std::string line;
    int saved_err = dup(2);
    while (std::getline(list, line)) {
        size_t tab = line.find('\t');
        if (tab == std::string::npos)
            continue;
        std::string in = line.substr(0, tab), out = line.substr(tab + 1);
        std::ifstream f(in, std::ios::binary);
        std::stringstream ss;
        ss << f.rdbuf();
        std::string warn_path = out + ".warn";
        // The converter reports widening through fprintf(stderr): capture it per schema.
        fflush(stderr);
        FILE * wf = fopen(warn_path.c_str(), "w");
        if (wf) {
            dup2(fileno(wf), 2);
        }
        const char * status = "ok";
        std::string gbnf, err;
        auto t0 = std::chrono::steady_clock::now();
        try {
            common_json j = common_json::parse(ss.str());
            gbnf = json_schema_to_grammar(j, /* force_gbnf = */ true);
        } catch (const std::exception & e) {
            err = e.what();
            status = "err";
        } catch (...) {
            err = "unknown exception";
            status = "err";
        }
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        fflush(stderr);
        dup2(saved_err, 2);
        long wlen = 0;
        if (wf) {
            fseek(wf, 0, SEEK_END);
            wlen = ftell(wf);
            fclose(wf);
        }
        if (wlen <= 0) {
            unlink(warn_path.c_str());
        } else if (err.empty()) {
            status = "warn";
        }
        if (err.empty()) {
            write_file(out + ".gbnf", gbnf);
        } else {
            write_file(out + ".err", err);
        }
        printf("%s\t%s\t%.3f\n", out.c_str(), status, ms);
        fflush(stdout);
    }
    return 0;
}
