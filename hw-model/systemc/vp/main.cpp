// main.cpp — npusim-vp, the example virtual platform (vp_host.h): runs ELF programs on npusim
// chips inside SystemC, through TLM transactions and interrupts, and reports what the host saw.
// The starting point for embedding npusim in another platform: docs/systemc.md.
#include <getopt.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <jansson.h>

#include "vp_host.h"

extern "C" {
#include "readfile.h"
}

namespace {

const char *const usage =
    "usage: npusim-vp [--arch PRESET|FILE] [--set SECTION.KEY=VALUE ...] [--functional]\n"
    "                 [--quantum NS] [--input [CHIP:]SYM=FILE ...] [--expect [CHIP:]SYM=FILE ...]\n"
    "                 [--dump [CHIP:]SYM=FILE ...] [--json] PROG.elf [CHIP1.elf ...]\n"
    "\n"
    "Runs PROG.elf on chip 0 (CHIP1.elf on chip 1, ...) of a SystemC TLM-2.0 virtual platform:\n"
    "a host writes each ELF image and the inputs into the chip's HBM, programs its registers,\n"
    "starts every chip at one instant, waits for the interrupts, and reads the outputs back.\n"
    "\n"
    "  --arch A        architecture preset or YAML file (default: tiny, as npusim's)\n"
    "  --set K=V       override one architecture key (repeatable)\n"
    "  --functional    move real bytes and compute values; else timing only\n"
    "  --quantum NS    how far the model may run ahead of SystemC time (default 1000 ns)\n"
    "  --input S=F     (functional) write file F's bytes into data symbol S before the start\n"
    "  --expect S=F    (functional) after the end, S must equal file F byte for byte (the\n"
    "                  whole symbol: a file of another size differs)\n"
    "  --dump S=F      (functional) after the end, write S's bytes to file F\n"
    "  --json          the result as JSON on stdout\n"
    "\n"
    "Exit status: 0 success, 2 bad input, 3 a program failed or an output differs, 1 internal.\n";

// 1234567 -> "1,234,567"
std::string thousands(uint64_t v)
{
    std::string s = std::to_string(v);
    for (int i = (int)s.size() - 3; i > 0; i -= 3)
        s.insert((size_t)i, ",");
    return s;
}

// A program or an input whole, through npusim's door for files (regular files only: a
// directory or a device such as /dev/zero is refused, not read forever; at most 4 GiB).
bool read_file(const std::string &path, std::vector<uint8_t> *out, np_err *err)
{
    char *text = nullptr;
    size_t len = 0;
    if (np_read_file(path.c_str(), UINT64_C(4) << 30, "a program or an input of npusim-vp",
                     &text, &len, err) != NP_OK)
        return false;
    out->assign((const uint8_t *)text, (const uint8_t *)text + len);
    free(text);
    return true;
}

// "[CHIP:]SYM=FILE" of option opt into *io.
bool parse_io(const char *opt, const char *arg, vp_io *io, np_err *err)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        return np_err_set(err, NP_ERR_USAGE, "--%s '%s': expected [CHIP:]SYM=FILE", opt, arg),
               false;
    std::string sym(arg, (size_t)(eq - arg));
    io->chip = 0;
    size_t colon = sym.find(':');
    if (colon != std::string::npos) {
        char *end;
        errno = 0;
        unsigned long long c = strtoull(sym.c_str(), &end, 10);
        if (end != sym.c_str() + colon || colon == 0 || sym[0] == '-')
            return np_err_set(err, NP_ERR_USAGE, "--%s '%s': CHIP must be a number", opt, arg),
                   false;
        if (errno == ERANGE || c >= (1ull << 20)) // the chips a system can have
            return np_err_set(err, NP_ERR_USAGE, "--%s '%s': chip %.*s is out of range (0 .. "
                              "1048575)", opt, arg, (int)colon, sym.c_str()), false;
        io->chip = (uint32_t)c;
        sym = sym.substr(colon + 1);
    }
    io->symbol = sym;
    io->name = eq + 1;
    return true;
}

void print_text(const vp_system &vp, const vp_result &r, const arch_config &cfg,
                bool functional, uint64_t quantum_ps, uint64_t model_ps)
{
    printf("npusim-vp: %u chip%s of %s, %s, quantum %s ps\n", vp.plat.n_chips(),
           vp.plat.n_chips() == 1 ? "" : "s", cfg.name, functional ? "functional" : "timing only",
           thousands(quantum_ps).c_str());
    printf("host: started every chip at %s ps; %s bytes moved by DMI, %s by b_transport\n",
           thousands(r.start_ps).c_str(), thousands(r.dmi_bytes).c_str(),
           thousands(r.bt_bytes).c_str());
    for (size_t i = 0; i < r.chips.size(); i++) {
        const vp_chip_result &c = r.chips[i];
        printf("chip %zu: %s; interrupt at sc_time_stamp() = %s ps; T_START %s ps, T_END %s ps "
               "(%s ps, %s cycles)\n", i, hw_chip_state_names[c.state],
               thousands(c.irq_ps).c_str(), thousands(c.start_ps).c_str(),
               thousands(c.end_ps).c_str(), thousands(c.end_ps - c.start_ps).c_str(),
               thousands(c.cycles).c_str());
        if (!c.error.empty())
            printf("  %s\n", c.error.c_str());
    }
    if (model_ps)
        printf("model: %s ps from the start to the last end (the npusim report's total_ps)\n",
               thousands(model_ps).c_str());
    for (const vp_output &o : r.outputs)
        printf("output chip %" PRIu32 " %s: %s bytes %s %s%s%s\n", o.chip, o.symbol.c_str(),
               thousands(o.bytes).c_str(), o.match ? "equal" : "differ from", o.name.c_str(),
               o.match ? "" : ": ", o.diff.c_str());
}

void print_json(const vp_system &vp, const vp_result &r, const arch_config &cfg,
                bool functional, uint64_t quantum_ps, uint64_t model_ps)
{
    json_t *j = json_object(), *chips = json_array(), *outs = json_array();
    json_object_set_new(j, "arch", json_string(cfg.name));
    json_object_set_new(j, "chips", json_integer(vp.plat.n_chips()));
    json_object_set_new(j, "functional", json_boolean(functional));
    json_object_set_new(j, "quantum_ps", json_integer((json_int_t)quantum_ps));
    json_object_set_new(j, "start_ps", json_integer((json_int_t)r.start_ps));
    json_object_set_new(j, "model_ps", json_integer((json_int_t)model_ps));
    json_object_set_new(j, "dmi_bytes", json_integer((json_int_t)r.dmi_bytes));
    json_object_set_new(j, "b_transport_bytes", json_integer((json_int_t)r.bt_bytes));
    for (size_t i = 0; i < r.chips.size(); i++) {
        const vp_chip_result &c = r.chips[i];
        json_t *o = json_object();
        json_object_set_new(o, "chip", json_integer((json_int_t)i));
        json_object_set_new(o, "state", json_string(hw_chip_state_names[c.state]));
        json_object_set_new(o, "irq_ps", json_integer((json_int_t)c.irq_ps));
        json_object_set_new(o, "start_ps", json_integer((json_int_t)c.start_ps));
        json_object_set_new(o, "end_ps", json_integer((json_int_t)c.end_ps));
        json_object_set_new(o, "cycles", json_integer((json_int_t)c.cycles));
        json_object_set_new(o, "error",
                            c.error.empty() ? json_null() : json_string(c.error.c_str()));
        json_array_append_new(chips, o);
    }
    for (const vp_output &x : r.outputs) {
        json_t *o = json_object();
        json_object_set_new(o, "chip", json_integer(x.chip));
        json_object_set_new(o, "symbol", json_string(x.symbol.c_str()));
        json_object_set_new(o, "file", json_string(x.name.c_str()));
        json_object_set_new(o, "bytes", json_integer((json_int_t)x.bytes));
        json_object_set_new(o, "match", json_boolean(x.match));
        json_array_append_new(outs, o);
    }
    json_object_set_new(j, "results", chips);
    json_object_set_new(j, "outputs", outs);
    json_dumpf(j, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    json_decref(j);
}

int fail(const np_err &e)
{
    char buf[NP_ERR_MSG_MAX + 128];
    fprintf(stderr, "npusim-vp: %s\n", np_err_format(&e, buf, sizeof buf));
    if (e.status == NP_ERR_USAGE)
        fprintf(stderr, "Run 'npusim-vp --help' for usage.\n");
    return np_status_exit_code(e.status);
}

} // namespace

int sc_main(int argc, char **argv)
{
    // sc_stop's "simulation stopped by user" is not news here
    sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO,
                                            sc_core::SC_DO_NOTHING);
    const char *arch = "tiny"; // npusim's default (CLI_DEFAULT_ARCH), so its ELFs load here
    std::vector<const char *> sets;
    bool functional = false, json = false;
    double quantum_ns = 1000;
    vp_job job;
    np_err err{};
    static const struct option longopts[] = {
        {"arch", required_argument, nullptr, 'a'},   {"set", required_argument, nullptr, 's'},
        {"functional", no_argument, nullptr, 'f'},   {"quantum", required_argument, nullptr, 'q'},
        {"input", required_argument, nullptr, 'i'},  {"expect", required_argument, nullptr, 'e'},
        {"dump", required_argument, nullptr, 'd'},   {"json", no_argument, nullptr, 'j'},
        {"help", no_argument, nullptr, 'h'},         {nullptr, 0, nullptr, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", longopts, nullptr)) != -1) {
        vp_io io;
        char *end;
        switch (c) {
        case 'a': arch = optarg; break;
        case 's': sets.push_back(optarg); break;
        case 'f': functional = true; break;
        case 'j': json = true; break;
        case 'h': fputs(usage, stdout); return 0;
        case 'q':
            quantum_ns = strtod(optarg, &end);
            if (end == optarg || *end || !(quantum_ns > 0) || quantum_ns > 1e12)
                return fail((np_err_set(&err, NP_ERR_USAGE, "--quantum '%s': a positive number "
                                        "of ns", optarg), err));
            break;
        case 'i':
        case 'e':
        case 'd': {
            const char *opt = c == 'i' ? "input" : c == 'e' ? "expect" : "dump";
            if (!parse_io(opt, optarg, &io, &err))
                return fail(err);
            if (c != 'd' && !read_file(io.name, &io.bytes, &err))
                return fail((np_err_prefix(&err, "--%s", opt), err));
            (c == 'i' ? job.inputs : c == 'e' ? job.expects : job.dumps).push_back(io);
            break;
        }
        default:
            return fail((np_err_set(&err, NP_ERR_USAGE, "unknown option '%s'", argv[optind - 1]),
                         err));
        }
    }
    if (optind >= argc)
        return fail((np_err_set(&err, NP_ERR_USAGE, "no program: give PROG.elf"), err));
    if (!functional && !(job.inputs.empty() && job.expects.empty() && job.dumps.empty()))
        return fail((np_err_set(&err, NP_ERR_USAGE, "--input, --expect and --dump need "
                                "--functional"), err));
    arch_config cfg;
    if (arch_resolve(arch, sets.data(), sets.size(), &cfg, &err) != NP_OK)
        return fail(err);
    for (int i = optind; i < argc; i++) {
        job.images.emplace_back();
        job.image_names.push_back(argv[i]);
        if (!read_file(argv[i], &job.images.back(), &err))
            return fail(err);
    }
    if (job.images.size() > (size_t)cfg.system.chips)
        return fail((np_err_set(&err, NP_ERR_RANGE, "%zu programs for a system of %lld chips",
                                job.images.size(), (long long)cfg.system.chips), err));
    npusim_platform_opts opts;
    opts.functional = functional;
    opts.quantum = sc_core::sc_time(quantum_ns, sc_core::SC_NS);
    try {
        vp_system vp(cfg, opts, job);
        sc_core::sc_start();
        const vp_result &r = vp.host.result;
        uint64_t model_ps = 0;
        core_report *rep = nullptr;
        if (r.finished &&
            hw_system_report(vp.plat.system(), HW_ALL_CHIPS, nullptr, &rep, &err) == NP_OK)
            model_ps = rep->total_ps;
        core_report_free(rep);
        if (!r.chips.empty()) { // the chips ran
            if (json)
                print_json(vp, r, cfg, functional, vp.plat.quantum_ps(), model_ps);
            else
                print_text(vp, r, cfg, functional, vp.plat.quantum_ps(), model_ps);
        }
        if (!r.finished && r.err.status == NP_OK)
            return fail((np_err_set(&err, NP_ERR_INTERNAL, "the simulation ended before the "
                                    "host's job did"), err));
        for (const vp_io &d : r.dumps) {
            std::ofstream f(d.name, std::ios::binary);
            if (!f.write((const char *)d.bytes.data(), (std::streamsize)d.bytes.size()))
                return fail((np_err_set(&err, NP_ERR_IO, "--dump: cannot write '%s'",
                                        d.name.c_str()), err));
        }
        if (r.err.status != NP_OK)
            return fail(r.err);
        if (fflush(stdout) != 0 || ferror(stdout))
            return fail((np_err_set(&err, NP_ERR_IO, "cannot write the results to standard "
                                    "output: %s", strerror(errno)), err));
    } catch (const npusim_error &e) {
        np_err_set(&err, e.status, "%s", e.what());
        return fail(err);
    }
    return 0;
}

// SystemC's own main() prints its banner on stdout before sc_main runs; stdout is for results
// (--json), so this main turns the banner off and then does what SystemC's does.
int main(int argc, char **argv)
{
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
    return sc_core::sc_elab_and_sim(argc, argv);
}
