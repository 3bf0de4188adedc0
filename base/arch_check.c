/* arch_check.c — arch_validate: every value's range, then the consistency rules between keys.
 *
 * Each rule is one row of arch_checks: a sentence for docs/config.md, the keys involved in
 * order of blame, and a predicate that explains a failure with the values and their units.
 * A failure is reported at the first key of the row that the user gave by --set (their latest
 * word), else at the first that the file wrote, so the position points at something the user
 * can change. Rules about the system's
 * topology are skipped for a 1-chip system: one chip needs no network. */
#include <inttypes.h>
#include <string.h>

#include "arch.h"

#define BLAME(...) {__VA_ARGS__, ARCH_KEY_COUNT}
#define K(sec, key) ARCH_KEY_##sec##_##key

static const char *topo_name(const arch_config *c)
{
    return arch_keys[K(system, topology)].enum_info->values[c->system.topology];
}

/* "64 KiB", or "100000 bytes" when no binary unit divides it */
static char *size_msg(uint64_t bytes, char *buf, size_t n)
{
    arch_size_text(bytes, buf, n);
    if (!strchr(buf, ' '))
        snprintf(buf, n, "%" PRIu64 " bytes", bytes);
    return buf;
}

static bool check_sram_banks(const arch_config *c, char *msg, size_t n)
{
    if (c->core.sram_bytes % (uint64_t)c->core.sram_banks == 0)
        return true;
    char sz[48];
    snprintf(msg, n,
             "core.sram_bytes = %s is not divisible by core.sram_banks = %" PRId64
             " banks (every bank has the same size)",
             size_msg(c->core.sram_bytes, sz, sizeof sz), c->core.sram_banks);
    return false;
}

static bool check_acc_row(const arch_config *c, char *msg, size_t n)
{
    uint64_t need = (uint64_t)c->core.array_cols * 4;
    if (c->core.acc_bytes >= need)
        return true;
    char have[48];
    snprintf(msg, n,
             "core.acc_bytes = %s cannot hold one row of fp32 accumulators: core.array_cols = "
             "%" PRId64 " PEs x 4 bytes = %" PRIu64 " bytes",
             size_msg(c->core.acc_bytes, have, sizeof have), c->core.array_cols, need);
    return false;
}

static bool check_some_dtype(const arch_config *c, char *msg, size_t n)
{
    if (c->core.macs_per_pe_bf16 > 0 || c->core.macs_per_pe_fp16 > 0 ||
        c->core.macs_per_pe_fp32 > 0 || c->core.macs_per_pe_int8 > 0)
        return true;
    snprintf(msg, n, "the array supports no data type: core.macs_per_pe_bf16, _fp16, _fp32 "
                     "and _int8 are all 0");
    return false;
}

static bool check_mesh_holds_cores(const arch_config *c, char *msg, size_t n)
{
    if (c->chip.mesh_x * c->chip.mesh_y >= c->chip.cores)
        return true;
    snprintf(msg, n,
             "a mesh of chip.mesh_x x chip.mesh_y = %" PRId64 " x %" PRId64
             " routers cannot hold chip.cores = %" PRId64 " cores (one core per router)",
             c->chip.mesh_x, c->chip.mesh_y, c->chip.cores);
    return false;
}

static bool check_link_port(const arch_config *c, char *msg, size_t n)
{
    if (c->chip.link_port_router < c->chip.mesh_x * c->chip.mesh_y)
        return true;
    snprintf(msg, n,
             "chip.link_port_router = %" PRId64 " is not a router of the chip.mesh_x x "
             "chip.mesh_y = %" PRId64 " x %" PRId64 " mesh (routers 0 .. %" PRId64 ")",
             c->chip.link_port_router, c->chip.mesh_x, c->chip.mesh_y,
             c->chip.mesh_x * c->chip.mesh_y - 1);
    return false;
}

static bool check_hbm_controllers(const arch_config *c, char *msg, size_t n)
{
    const arch_chip *h = &c->chip;
    if (h->hbm_controllers > h->hbm_channels) {
        snprintf(msg, n, "chip.hbm_controllers = %" PRId64 " is more than chip.hbm_channels = %"
                 PRId64 ": each controller owns at least one channel", h->hbm_controllers,
                 h->hbm_channels);
        return false;
    }
    if (h->hbm_controllers && h->hbm_placement == ARCH_HBM_PLACEMENT_STRIDE &&
        h->hbm_controller_router >= h->mesh_x * h->mesh_y) {
        snprintf(msg, n, "chip.hbm_controller_router = %" PRId64 " is not a router of the "
                 "chip.mesh_x x chip.mesh_y = %" PRId64 " x %" PRId64 " mesh (routers 0 .. %"
                 PRId64 ")", h->hbm_controller_router, h->mesh_x, h->mesh_y,
                 h->mesh_x * h->mesh_y - 1);
        return false;
    }
    return true;
}

/* The L2 (chip.l2_bytes > 0): whole lines of whole sectors. */
static bool check_l2_lines(const arch_config *c, char *msg, size_t n)
{
    const arch_chip *h = &c->chip;
    if (!h->l2_bytes)
        return true;
    char sz[48];
    uint64_t line = (uint64_t)h->l2_line_bytes;
    if (h->l2_bytes % line) {
        snprintf(msg, n, "chip.l2_line_bytes = %" PRIu64 " bytes does not divide chip.l2_bytes "
                 "= %s: the L2 holds whole lines", line, size_msg(h->l2_bytes, sz, sizeof sz));
        return false;
    }
    return true;
}

static bool check_l2_sectors(const arch_config *c, char *msg, size_t n)
{
    uint64_t line = (uint64_t)c->chip.l2_line_bytes, sector = (uint64_t)c->chip.l2_sector_bytes;
    if (!c->chip.l2_bytes || (line % sector == 0 && line / sector <= 32))
        return true;
    snprintf(msg, n, "chip.l2_sector_bytes = %" PRIu64 " bytes must divide chip.l2_line_bytes "
             "= %" PRIu64 " bytes into at most 32 sectors", sector, line);
    return false;
}

/* The L2 cache's sets: whole, and at least one. */
static bool check_l2_sets(const arch_config *c, char *msg, size_t n)
{
    const arch_chip *h = &c->chip;
    if (!h->l2_bytes || h->l2_bytes % (uint64_t)h->l2_line_bytes)
        return true; /* check_l2_lines says why */
    uint64_t lines = h->l2_bytes / (uint64_t)h->l2_line_bytes, ways = (uint64_t)h->l2_ways;
    char sz[48];
    if (h->l2_mode == ARCH_L2_MODE_CACHE && (ways > lines || lines % ways)) {
        snprintf(msg, n, "chip.l2_ways = %" PRIu64 " ways %s the %" PRIu64 " lines of "
                 "chip.l2_bytes = %s (chip.l2_line_bytes = %" PRId64 " bytes): every set has "
                 "l2_ways lines",
                 ways, ways > lines ? "are more than" : "do not divide", lines,
                 size_msg(h->l2_bytes, sz, sizeof sz), h->l2_line_bytes);
        return false;
    }
    return true;
}

static bool check_l2_slices(const arch_config *c, char *msg, size_t n)
{
    const arch_chip *h = &c->chip;
    if (!h->l2_bytes || h->l2_bytes / (uint64_t)h->l2_line_bytes >= (uint64_t)h->l2_slices)
        return true;
    snprintf(msg, n, "chip.l2_slices = %" PRId64 " slices are more than the %" PRIu64
             " lines of the L2: every slice holds at least one line", h->l2_slices,
             h->l2_bytes / (uint64_t)h->l2_line_bytes);
    return false;
}

static bool check_c2c_pieces(const arch_config *c, char *msg, size_t n)
{
    /* the largest message is the whole HBM; the simulation counts its pieces in 32 bits */
    uint64_t pb = c->chip.c2c_piece_bytes, pieces = c->chip.hbm_bytes / pb + 1;
    if (pieces <= UINT32_MAX)
        return true;
    char hb[48], ps[48];
    snprintf(msg, n, "chip.c2c_piece_bytes = %s is too small for chip.hbm_bytes = %s: a message "
             "of the whole HBM would be more pieces than 32 bits count (at least %" PRIu64
             " bytes)",
             size_msg(pb, ps, sizeof ps), size_msg(c->chip.hbm_bytes, hb, sizeof hb),
             c->chip.hbm_bytes / UINT32_MAX + 1);
    return false;
}

static bool check_torus2d_flat(const arch_config *c, char *msg, size_t n)
{
    if (c->system.chips == 1 || c->system.topology != ARCH_TOPOLOGY_TORUS2D ||
        c->system.torus_z == 1)
        return true;
    snprintf(msg, n, "system.topology torus2d has no z dimension: system.torus_z must be 1, "
                     "not %" PRId64, c->system.torus_z);
    return false;
}

static bool check_torus_dims(const arch_config *c, char *msg, size_t n)
{
    const arch_system *s = &c->system;
    if (s->chips == 1)
        return true;
    if (s->topology == ARCH_TOPOLOGY_TORUS2D) {
        if (s->torus_x * s->torus_y == s->chips)
            return true;
        snprintf(msg, n,
                 "system.topology torus2d: system.torus_x x system.torus_y = %" PRId64
                 " x %" PRId64 " = %" PRId64 " chips, but system.chips = %" PRId64,
                 s->torus_x, s->torus_y, s->torus_x * s->torus_y, s->chips);
        return false;
    }
    if (s->topology == ARCH_TOPOLOGY_TORUS3D) {
        /* Each dimension is at most 65536, so the product fits in int64. */
        int64_t prod = s->torus_x * s->torus_y * s->torus_z;
        if (prod == s->chips)
            return true;
        snprintf(msg, n,
                 "system.topology torus3d: system.torus_x x system.torus_y x system.torus_z = "
                 "%" PRId64 " x %" PRId64 " x %" PRId64 " = %" PRId64
                 " chips, but system.chips = %" PRId64,
                 s->torus_x, s->torus_y, s->torus_z, prod, s->chips);
        return false;
    }
    return true;
}

static bool check_islands(const arch_config *c, char *msg, size_t n)
{
    const arch_system *s = &c->system;
    if (s->chips == 1 || s->topology != ARCH_TOPOLOGY_HIERARCHICAL ||
        s->chips % s->island_chips == 0)
        return true;
    snprintf(msg, n,
             "system.topology hierarchical: system.chips = %" PRId64
             " is not a whole number of islands of system.island_chips = %" PRId64 " chips",
             s->chips, s->island_chips);
    return false;
}

static bool check_links(const arch_config *c, char *msg, size_t n)
{
    const arch_system *s = &c->system;
    if (s->chips == 1)
        return true;
    int64_t need = 1;
    char why[128] = "one to its switch";
    switch (s->topology) {
    case ARCH_TOPOLOGY_RING:
        need = 2;
        snprintf(why, sizeof why, "one to each neighbour");
        break;
    case ARCH_TOPOLOGY_TORUS2D:
    case ARCH_TOPOLOGY_TORUS3D:
        need = 2 * ((s->torus_x > 1) + (s->torus_y > 1) +
                    (s->topology == ARCH_TOPOLOGY_TORUS3D && s->torus_z > 1));
        snprintf(why, sizeof why, "2 per dimension longer than 1");
        break;
    case ARCH_TOPOLOGY_FULLY_CONNECTED:
        need = s->chips - 1;
        snprintf(why, sizeof why, "one to every other chip");
        break;
    case ARCH_TOPOLOGY_SWITCH:
    case ARCH_TOPOLOGY_FAT_TREE:
    case ARCH_TOPOLOGY_HIERARCHICAL:
    case ARCH_TOPOLOGY_COUNT:
        break;
    }
    if (s->links_per_chip >= need)
        return true;
    snprintf(msg, n,
             "system.links_per_chip = %" PRId64 " links is too few for a %s of %" PRId64
             " chips: it needs %" PRId64 " (%s)",
             s->links_per_chip, topo_name(c), s->chips, need, why);
    return false;
}

static bool check_switch_ports(const arch_config *c, char *msg, size_t n)
{
    const arch_system *s = &c->system;
    if (s->chips == 1)
        return true;
    if (s->topology == ARCH_TOPOLOGY_SWITCH && s->chips > s->switch_radix) {
        snprintf(msg, n,
                 "system.switch_radix = %" PRId64 " ports cannot connect system.chips = %" PRId64
                 " chips to one switch (one port per chip)",
                 s->switch_radix, s->chips);
        return false;
    }
    /* Each leaf switch gives half its ports to chips and half to the spine. */
    int64_t fat_max = s->switch_radix * s->switch_radix / 2;
    if (s->topology == ARCH_TOPOLOGY_FAT_TREE && s->chips > fat_max) {
        snprintf(msg, n,
                 "a two-level fat tree of system.switch_radix = %" PRId64
                 "-port switches connects at most %" PRId64 " chips (radix^2/2), not "
                 "system.chips = %" PRId64,
                 s->switch_radix, fat_max, s->chips);
        return false;
    }
    return true;
}

static bool check_power_cap(const arch_config *c, char *msg, size_t n)
{
    if (c->chip.power_cap_w <= 0 || c->energy.static_w < c->chip.power_cap_w)
        return true;
    snprintf(msg, n,
             "energy.static_w = %g W reaches chip.power_cap_w = %g W: no core clock keeps a "
             "chip under its cap",
             c->energy.static_w, c->chip.power_cap_w);
    return false;
}

const arch_check_info arch_checks[] = {
    {"`core.sram_bytes` is divisible by `core.sram_banks` (all banks have the same size).",
     BLAME(K(core, sram_bytes), K(core, sram_banks)), check_sram_banks},
    {"`core.acc_bytes` holds at least one row of fp32 accumulators: `core.array_cols` x 4 "
     "bytes.",
     BLAME(K(core, acc_bytes), K(core, array_cols)), check_acc_row},
    {"At least one of `core.macs_per_pe_bf16`, `_fp16`, `_fp32`, `_int8` is above 0.",
     BLAME(K(core, macs_per_pe_bf16), K(core, macs_per_pe_fp16), K(core, macs_per_pe_fp32),
           K(core, macs_per_pe_int8)),
     check_some_dtype},
    {"The mesh has a router for every core: `chip.mesh_x` x `chip.mesh_y` >= `chip.cores`.",
     BLAME(K(chip, mesh_x), K(chip, mesh_y), K(chip, cores)), check_mesh_holds_cores},
    {"The link ports sit on a router of the mesh: `chip.link_port_router` < `chip.mesh_x` x "
     "`chip.mesh_y`.",
     BLAME(K(chip, link_port_router), K(chip, mesh_x), K(chip, mesh_y)), check_link_port},
    {"Every HBM controller owns a channel (`chip.hbm_controllers` <= `chip.hbm_channels`), and "
     "with `chip.hbm_placement: stride` the first sits on a router of the mesh "
     "(`chip.hbm_controller_router` < `chip.mesh_x` x `chip.mesh_y`).",
     BLAME(K(chip, hbm_controllers), K(chip, hbm_channels), K(chip, hbm_controller_router),
           K(chip, hbm_placement), K(chip, mesh_x), K(chip, mesh_y)),
     check_hbm_controllers},
    {"With an L2 (`chip.l2_bytes` > 0), `chip.l2_line_bytes` divides `chip.l2_bytes`.",
     BLAME(K(chip, l2_line_bytes), K(chip, l2_bytes)), check_l2_lines},
    {"With an L2, `chip.l2_sector_bytes` divides `chip.l2_line_bytes` into at most 32 sectors.",
     BLAME(K(chip, l2_sector_bytes), K(chip, l2_line_bytes), K(chip, l2_bytes)),
     check_l2_sectors},
    {"With an L2 cache, `chip.l2_ways` divides its lines (`l2_bytes` / `l2_line_bytes`) into "
     "whole sets.",
     BLAME(K(chip, l2_ways), K(chip, l2_bytes), K(chip, l2_line_bytes), K(chip, l2_mode)),
     check_l2_sets},
    {"With an L2, `chip.l2_slices` is at most its lines (`l2_bytes` / `l2_line_bytes`).",
     BLAME(K(chip, l2_slices), K(chip, l2_bytes), K(chip, l2_line_bytes)), check_l2_slices},
    {"A message between chips, at most the whole HBM, is at most 2^32 - 1 pieces: "
     "`chip.hbm_bytes` / `chip.c2c_piece_bytes` < 2^32 - 1.",
     BLAME(K(chip, c2c_piece_bytes), K(chip, hbm_bytes)), check_c2c_pieces},
    {"A `torus2d` has `system.torus_z` = 1.",
     BLAME(K(system, torus_z), K(system, topology)), check_torus2d_flat},
    {"The torus dimensions multiply to the chip count: `torus_x` x `torus_y` (`torus2d`) or "
     "`torus_x` x `torus_y` x `torus_z` (`torus3d`) = `system.chips`.",
     BLAME(K(system, torus_x), K(system, torus_y), K(system, torus_z), K(system, chips),
           K(system, topology)),
     check_torus_dims},
    {"A `hierarchical` system is whole islands: `system.chips` is divisible by "
     "`system.island_chips`.",
     BLAME(K(system, island_chips), K(system, chips), K(system, topology)), check_islands},
    {"Each chip has the links its topology needs: `ring` 2, `torus2d`/`torus3d` 2 per "
     "dimension longer than 1, `fully_connected` chips - 1, `switch`/`fat_tree`/"
     "`hierarchical` 1.",
     BLAME(K(system, links_per_chip), K(system, topology), K(system, chips), K(system, torus_x),
           K(system, torus_y), K(system, torus_z)),
     check_links},
    {"A `switch` has a port per chip (`system.chips` <= `system.switch_radix`); a `fat_tree` "
     "connects at most `switch_radix`^2 / 2 chips.",
     BLAME(K(system, switch_radix), K(system, chips), K(system, topology)), check_switch_ports},
    {"A power cap is above the static power: `chip.power_cap_w` = 0 (none) or > "
     "`energy.static_w`.",
     BLAME(K(chip, power_cap_w), K(energy, static_w)), check_power_cap},
};
const size_t arch_n_checks = sizeof arch_checks / sizeof arch_checks[0];

/* Fills err for a failure blamed on key k (which may be ARCH_KEY_COUNT: none written). */
static np_status arch_blame(const arch_config *cfg, arch_key k, arch_section sec, np_status s,
                            const char *msg, np_err *err)
{
    const arch_source *src = &cfg->src;
    if (k < ARCH_KEY_COUNT && src->key[k].origin == ARCH_ORIGIN_FILE)
        return np_err_at(err, s, src->path, src->key[k].line, src->key[k].col, "%s", msg);
    if (k < ARCH_KEY_COUNT && src->key[k].origin == ARCH_ORIGIN_SET) {
        char val[64];
        return np_err_set(err, s, "--set %s=%s: %s", arch_keys[k].full_name,
                          arch_value_text(cfg, &arch_keys[k], val, sizeof val), msg);
    }
    if (src->section[sec].origin == ARCH_ORIGIN_FILE)
        return np_err_at(err, s, src->path, src->section[sec].line, src->section[sec].col, "%s",
                         msg);
    return np_err_at(err, s, src->path[0] ? src->path : NULL, 0, 0, "%s", msg);
}

/* Every failure of cfg into errs[0..max) (counted in *n beyond max); stops after the first
 * when first_only. */
static np_status arch_validate_into(const arch_config *cfg, np_err *errs, size_t max, size_t *n,
                                    bool first_only)
{
    char msg[NP_ERR_MSG_MAX - 80];
    np_err scratch;
    *n = 0;
#define ARCH_FAIL(call)                                                                        \
    do {                                                                                       \
        np_err *slot = *n < max ? &errs[*n] : &scratch;                                        \
        np_status fs_ = (call);                                                                \
        (*n)++;                                                                                \
        if (first_only)                                                                        \
            return fs_;                                                                        \
    } while (0)
    for (size_t i = 0; i < ARCH_KEY_COUNT; i++) {
        const arch_key_info *k = &arch_keys[i];
        double v = arch_get(cfg, k);
        char text[64], range[128];
        if (k->type == ARCH_TYPE_ENUM) {
            if (v < 0 || v >= (double)k->enum_info->n) {
                snprintf(msg, sizeof msg, "%s holds %.0f, which is not a %s value", k->full_name,
                         v, k->enum_info->name);
                ARCH_FAIL(arch_blame(cfg, (arch_key)i, k->section, NP_ERR_RANGE, msg, slot));
            }
            continue;
        }
        if (v >= k->min && v <= k->max)
            continue;
        arch_value_text(cfg, k, text, sizeof text);
        if (k->type == ARCH_TYPE_SIZE) {
            char lo[48], hi[48];
            snprintf(range, sizeof range, "%s to %s",
                     arch_size_text((uint64_t)k->min, lo, sizeof lo),
                     arch_size_text((uint64_t)k->max, hi, sizeof hi));
            snprintf(msg, sizeof msg, "%s = %s is out of range: allowed %s", k->full_name, text,
                     range);
        } else {
            snprintf(msg, sizeof msg, "%s = %s %s is out of range: allowed %.15g to %.15g %s",
                     k->full_name, text, k->unit, k->min, k->max, k->unit);
        }
        ARCH_FAIL(arch_blame(cfg, (arch_key)i, k->section, NP_ERR_RANGE, msg, slot));
    }
    for (size_t i = 0; i < arch_n_checks; i++) {
        const arch_check_info *c = &arch_checks[i];
        if (c->ok(cfg, msg, sizeof msg))
            continue;
        /* A --set is the user's latest word, so it is blamed before a key of the file. */
        arch_key blamed = ARCH_KEY_COUNT;
        for (const arch_key *k = c->blame; *k != ARCH_KEY_COUNT && blamed == ARCH_KEY_COUNT; k++)
            if (cfg->src.key[*k].origin == ARCH_ORIGIN_SET)
                blamed = *k;
        for (const arch_key *k = c->blame; *k != ARCH_KEY_COUNT && blamed == ARCH_KEY_COUNT; k++)
            if (cfg->src.key[*k].origin == ARCH_ORIGIN_FILE)
                blamed = *k;
        ARCH_FAIL(arch_blame(cfg, blamed, arch_keys[c->blame[0]].section, NP_ERR_INCONSISTENT,
                             msg, slot));
    }
#undef ARCH_FAIL
    return *n ? (max ? errs[0].status : scratch.status) : NP_OK;
}

np_status arch_validate(const arch_config *cfg, np_err *err)
{
    size_t n;
    np_err e = {0};
    np_status st = arch_validate_into(cfg, &e, 1, &n, true);
    if (st != NP_OK && err)
        *err = e;
    return st;
}

np_status arch_validate_all(const arch_config *cfg, np_err *errs, size_t max, size_t *n)
{
    return arch_validate_into(cfg, errs, max, n, false);
}
