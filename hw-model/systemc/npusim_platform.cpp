// npusim_platform.cpp — the platform of npusim chips (npusim_chip.h): the model on one event
// queue, and the thread that runs it in step with SystemC time.
//
// The platform's process (run, an SC_METHOD) does, each time it is triggered:
//
//   1. show the chips whose programs ended their end (state, times, message, interrupt): the
//      process was triggered at the instant the model stopped for them;
//   2. with no event queued, wait for a START (the wake_ event); otherwise
//   3. dispatch the model's events up to the next quantum boundary after the latest of the
//      SystemC time, the model's, and the next activity any other process has scheduled
//      (sc_time_to_pending_activity: quanta nobody could look into are skipped; with no
//      activity scheduled at all, up to the next end); a program's end stops it at that
//      instant (on_end calls evq_stop); then hw_system_check (a deadlock: nothing left to
//      happen);
//   4. trigger again when SystemC time reaches the model's: the model's lead is the local
//      time of a tlm_quantumkeeper, waited out with next_trigger rather than sync() (a
//      method has no stack to switch, which makes a quantum cheap: about 0.1 us of host time).
//
// A START becomes an event of the model's queue at the start's time (start_ev), so it lands
// at that instant whatever the process is doing.
#include "npusim_chip.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>

extern "C" {
#include "clock.h"
}

using sc_core::sc_time;

namespace {

uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

// The ps after which a clock of f Hz has its edges where they were from time 0 (edges are
// rounded up to whole ps, clock.h): 10^12 / gcd(f, 10^12).
uint64_t clock_pattern_ps(double ghz)
{
    uint64_t f = (uint64_t)llround(ghz * 1e9);
    return f ? CLK_PS_PER_S / gcd(f, CLK_PS_PER_S) : 1;
}

// SystemC time units per ps (the default resolution is 1 ps).
uint64_t units_per_ps()
{
    static const uint64_t k = sc_time(1, sc_core::SC_PS).value();
    return k;
}

} // namespace

uint64_t npusim_platform::ps_of(const sc_time &t) { return t.value() / units_per_ps(); }

sc_time npusim_platform::time_of_ps(uint64_t ps)
{
    return sc_time::from_value(ps * units_per_ps());
}

npusim_platform::npusim_platform(sc_core::sc_module_name name, const arch_config &cfg,
                                 uint32_t n_chips, const npusim_platform_opts &opts)
    : sc_module(name), cfg_(cfg), opts_(opts)
{
    np_err err{};
    if (sc_time(1, sc_core::SC_PS).value() == 0 || sc_core::sc_get_time_resolution() >
                                                        sc_time(1, sc_core::SC_PS)) {
        np_err_set(&err, NP_ERR_INCONSISTENT, "the SystemC time resolution must be 1 ps or finer "
                   "(the model counts picoseconds)");
        throw npusim_error(err);
    }
    hw_system_opts o{};
    o.n_chips = n_chips;
    o.functional = opts.functional;
    o.groups = opts_.groups.empty() ? nullptr : opts_.groups.data();
    o.n_groups = opts_.groups.size();
    o.on_end = on_end;
    o.on_end_ctx = this;
    if (n_chips == 0)
        np_err_set(&err, NP_ERR_RANGE, "a platform needs at least one chip");
    else if (evq_create(&q_, &err) == NP_OK)
        hw_system_create(&cfg_, q_, &o, &sys_, &err);
    if (!sys_) {
        evq_free(q_);
        throw npusim_error(err);
    }
    uint64_t core = clock_pattern_ps(cfg_.core.clock_ghz),
             noc = clock_pattern_ps(cfg_.chip.noc_clock_ghz);
    start_granule_ps_ = core / gcd(core, noc) * noc;
    for (uint32_t i = 0; i < n_chips; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "chip%" PRIu32, i);
        chips_.push_back(new npusim_chip(nm, *this, i));
    }
    SC_HAS_PROCESS(npusim_platform);
    quantum_ = quantum_ps();
    SC_METHOD(run); // a method, not a thread: no stack switch per quantum
}

npusim_platform::~npusim_platform()
{
    hw_system_free(sys_); // before the chips: the model borrows their programs
    sys_ = nullptr;
    evq_free(q_);
    q_ = nullptr;
    for (npusim_chip *c : chips_)
        delete c;
}

uint64_t npusim_platform::quantum_ps() const
{
    sc_time q = opts_.quantum;
    if (q == sc_core::SC_ZERO_TIME)
        q = tlm::tlm_global_quantum::instance().get();
    if (q == sc_core::SC_ZERO_TIME)
        q = sc_time(1, sc_core::SC_US);
    uint64_t ps = ps_of(q);
    return ps ? ps : 1;
}

void npusim_platform::on_end(void *ctx, hw_system *, uint32_t chip, hw_chip_state st)
{
    npusim_platform *p = static_cast<npusim_platform *>(ctx);
    p->ended_.push_back(chip);
    p->ended_state_.push_back(st);
    evq_stop(p->q_); // SystemC must reach this instant before anything else is dispatched
}

void npusim_platform::start_ev(evq *, void *ctx, uint64_t)
{
    npusim_chip *c = static_cast<npusim_chip *>(ctx);
    npusim_platform &p = c->plat_;
    np_err err{};
    if (hw_system_start(p.sys_, c->idx_, &err) != NP_OK) { // out of memory: the program fails
        c->err_ = err;
        p.ended_.push_back(c->idx_);
        p.ended_state_.push_back(HW_CHIP_FAULT);
        evq_stop(p.q_);
    }
}

bool npusim_platform::start_at(npusim_chip &c, uint64_t t_ps, np_err *err)
{
    if (broken_.status != NP_OK) {
        *err = broken_;
        return false;
    }
    uint64_t t = t_ps > evq_now(q_) ? t_ps : evq_now(q_);
    t = (t + start_granule_ps_ - 1) / start_granule_ps_ * start_granule_ps_;
    if (evq_schedule_at(q_, t, start_ev, &c, 0, nullptr, err) != NP_OK)
        return false;
    c.t_start_ps_ = t;
    wake_.notify(sc_core::SC_ZERO_TIME);
    return true;
}

void npusim_platform::run()
{
    // SystemC has caught up with the model: show the ends it stopped at.
    std::vector<uint32_t> ended;
    std::vector<hw_chip_state> states;
    ended.swap(ended_);
    states.swap(ended_state_);
    for (size_t i = 0; i < ended.size(); i++)
        chips_[ended[i]]->model_ended(states[i]);
    if (!evq_pending(q_) || broken_.status != NP_OK) { // nothing to run until a START
        sc_core::next_trigger(wake_);
        return;
    }
    uint64_t now = ps_of(sc_core::sc_time_stamp());
    uint64_t from = now > evq_now(q_) ? now : evq_now(q_);
    // Quanta in which no other process has anything to do are skipped: the model runs up to
    // the quantum boundary after the next activity SystemC has scheduled, or, with none, until
    // a program ends (nothing could have looked at it before).
    sc_time idle = sc_core::sc_time_to_pending_activity();
    bool forever = idle >= sc_core::sc_max_time() - sc_core::sc_time_stamp();
    uint64_t next = forever ? UINT64_MAX : now + ps_of(idle);
    if (next > from)
        from = next;
    np_err err{};
    np_status st = forever ? evq_run(q_, &err)
                           : evq_run_until(q_, (from / quantum_ + 1) * quantum_, &err);
    if (st != NP_OK) {
        // Out of host memory inside the model: its events cannot be trusted any more, so
        // every chip with a program under way fails with that error and nothing runs again.
        broken_ = err;
        for (npusim_chip *c : chips_)
            if (c->vis_ == NPU_STATE_RUNNING) {
                c->err_ = err;
                ended_.push_back(c->idx_);
                ended_state_.push_back(HW_CHIP_FAULT);
            }
    }
    hw_system_check(sys_);
    // The model is ahead by its local time; SystemC gets there before anything is shown.
    uint64_t model = evq_now(q_);
    qk_.set(time_of_ps(model > now ? model - now : 0));
    sc_core::next_trigger(qk_.get_local_time());
    qk_.reset();
}
