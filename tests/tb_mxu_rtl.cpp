// tb_mxu_rtl.cpp — Verilator test bench: the register-level systolic arrays of hw-model/rtl/
// (mxu_ws.sv, mxu_os.sv) run GEMMs fold by fold, and what they do is compared with
// hw-model/mxu_timing.c, the closed-form model the simulator uses (SCALE-Sim v2's counts).
//
// For every fold the bench feeds the operands skewed (row r one edge after row r - 1) and
// watches the outputs appear; it never assumes when. It checks that every output equals a
// reference product, and measures each fold's length: ws/is from the first preload edge to
// the edge the last output leaves the bottom row (found by its value, then the rest of its
// column must follow on consecutive edges), os to the last edge any accumulator changes
// (operands are 1..100, so every MAC changes one). SCALE-Sim pads a partial fold to the
// whole array, so the measured length plus the unused rows and columns (os) or columns
// (ws/is) must equal mxu_timing's fold_cycles, and the folds together mxu_gemm_cycles.
//
// C++ because Verilator's models are C++; CUnit as in every other test, one ctest per
// test (the first argument names it).
#include <CUnit/Basic.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "Vmxu_os_3x5.h"
#include "Vmxu_os_4x4.h"
#include "Vmxu_ws_3x5.h"
#include "Vmxu_ws_4x4.h"

extern "C" {
#include "mxu_timing.h"
}

namespace {

using Mat = std::vector<std::vector<int64_t>>;

Mat zeros(size_t r, size_t c) { return Mat(r, std::vector<int64_t>(c, 0)); }

// Deterministic operands in 1..100.
Mat operands(size_t r, size_t c, uint64_t seed)
{
    Mat m = zeros(r, c);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (auto &row : m)
        for (auto &v : row) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            v = 1 + (int64_t)(x % 100);
        }
    return m;
}

Mat product(const Mat &a, const Mat &b)
{
    Mat c = zeros(a.size(), b[0].size());
    for (size_t i = 0; i < a.size(); i++)
        for (size_t k = 0; k < b.size(); k++)
            for (size_t j = 0; j < b[0].size(); j++)
                c[i][j] += a[i][k] * b[k][j];
    return c;
}

int64_t sext48(uint64_t v) { return (int64_t)(v << 16) >> 16; }

template <class V> void tick(V &m)
{
    m.clk = 0;
    m.eval();
    m.clk = 1;
    m.eval();
}

// One weight-stationary GEMM O[T][Sc] = S[T][Sr] x W[Sr][Sc] on an R x C array: W stays in
// the PEs, S streams. Returns the measured cycles padded as SCALE-Sim counts them (see top).
template <class V> uint64_t run_ws(unsigned R, unsigned C, const Mat &S, const Mat &W, Mat &O)
{
    V m;
    size_t T = S.size(), Sr = W.size(), Sc = W[0].size();
    O = zeros(T, Sc);
    uint64_t total = 0;
    for (size_t r0 = 0; r0 < Sr; r0 += R)
        for (size_t c0 = 0; c0 < Sc; c0 += C) {
            size_t rows = Sr - r0 < R ? Sr - r0 : R, cols = Sc - c0 < C ? Sc - c0 : C;
            // this fold's partial sums, to recognise the first output of each column
            Mat want = zeros(T, cols);
            for (size_t t = 0; t < T; t++)
                for (size_t c = 0; c < cols; c++)
                    for (size_t r = 0; r < rows; r++)
                        want[t][c] += S[t][r0 + r] * W[r0 + r][c0 + c];
            uint64_t edges = 0;
            for (unsigned i = 0; i < R; i++) { // preload: row R - 1 first
                m.load = 1;
                for (unsigned c = 0; c < C; c++) {
                    size_t wr = r0 + R - 1 - i, wc = c0 + c;
                    m.w_top[c] = (uint16_t)(R - 1 - i < rows && c < cols ? W[wr][wc] : 0);
                }
                for (unsigned r = 0; r < R; r++)
                    m.a_left[r] = 0;
                tick(m);
                edges++;
            }
            std::vector<int64_t> first(cols, -1); // edge of column c's output for t = 0
            size_t seen = 0;                        // outputs collected
            for (size_t t = 0; seen < T * cols; t++) {
                if (edges > 64 * (T + R + C)) {
                    CU_FAIL("the array never produced all outputs");
                    return 0;
                }
                m.load = 0;
                for (unsigned r = 0; r < R; r++)
                    m.a_left[r] = (uint16_t)(t >= r && t - r < T && r < rows ? S[t - r][r0 + r] : 0);
                tick(m);
                edges++;
                for (size_t c = 0; c < cols; c++) {
                    int64_t v = sext48(m.psum_out[c]);
                    if (first[c] < 0 && v == want[0][c])
                        first[c] = (int64_t)edges;
                    if (first[c] < 0)
                        continue;
                    uint64_t k = edges - (uint64_t)first[c]; // the output this edge shows
                    if (k < T) {
                        CU_ASSERT_EQUAL(v, want[k][c]);
                        O[k][c0 + c] += v;
                        seen++;
                    }
                }
            }
            total += edges + (C - cols); // SCALE-Sim pads the unused columns' drain
        }
    return total;
}

// One output-stationary GEMM O[M][N] = A[M][K] x B[K][N] on an R x C array.
template <class V> uint64_t run_os(unsigned R, unsigned C, const Mat &A, const Mat &B, Mat &O)
{
    V m;
    size_t M = A.size(), K = B.size(), N = B[0].size();
    O = zeros(M, N);
    uint64_t total = 0;
    for (size_t i0 = 0; i0 < M; i0 += R)
        for (size_t j0 = 0; j0 < N; j0 += C) {
            size_t rows = M - i0 < R ? M - i0 : R, cols = N - j0 < C ? N - j0 : C;
            std::vector<std::vector<int64_t>> prev(R, std::vector<int64_t>(C, 0));
            uint64_t edges = 0, last_change = 0;
            for (size_t e = 0; e < K + R + C + 4; e++) { // long enough: nothing changes after
                m.clear = e == 0;
                for (unsigned i = 0; i < R; i++)
                    m.a_left[i] = (uint16_t)(e >= i && e - i < K && i < rows ? A[i0 + i][e - i] : 0);
                for (unsigned j = 0; j < C; j++)
                    m.b_top[j] = (uint16_t)(e >= j && e - j < K && j < cols ? B[e - j][j0 + j] : 0);
                tick(m);
                edges++;
                for (unsigned i = 0; i < R; i++)
                    for (unsigned j = 0; j < C; j++) {
                        int64_t v = sext48(m.acc[i][j]);
                        if (v != prev[i][j])
                            last_change = edges;
                        prev[i][j] = v;
                    }
            }
            for (size_t i = 0; i < rows; i++)
                for (size_t j = 0; j < cols; j++)
                    O[i0 + i][j0 + j] = prev[i][j];
            total += last_change + (R - rows) + (C - cols); // SCALE-Sim pads both
        }
    return total;
}

const unsigned shapes[][3] = {{4, 4, 4},  {7, 5, 9}, {1, 1, 1},  {13, 6, 3},
                              {5, 11, 8}, {16, 9, 7}, {3, 17, 2}, {9, 2, 13}};

template <class V> void check_ws_is(unsigned R, unsigned C)
{
    for (const auto &s : shapes) {
        unsigned M = s[0], N = s[1], K = s[2];
        Mat A = operands(M, K, M * 131 + K), B = operands(K, N, N * 71 + K), want = product(A, B);
        for (arch_dataflow df : {ARCH_DATAFLOW_WS, ARCH_DATAFLOW_IS}) {
            Mat O;
            uint64_t cycles;
            if (df == ARCH_DATAFLOW_WS) { // B stays, A streams: O = A x B
                cycles = run_ws<V>(R, C, A, B, O);
                CU_ASSERT(O == want);
            } else { // A stays (transposed), B streams: O = B^T x A^T = (A x B)^T
                Mat At = zeros(K, M), Bt = zeros(N, K);
                for (unsigned i = 0; i < M; i++)
                    for (unsigned k = 0; k < K; k++)
                        At[k][i] = A[i][k];
                for (unsigned k = 0; k < K; k++)
                    for (unsigned j = 0; j < N; j++)
                        Bt[j][k] = B[k][j];
                cycles = run_ws<V>(R, C, Bt, At, O);
                for (unsigned i = 0; i < M; i++)
                    for (unsigned j = 0; j < N; j++)
                        CU_ASSERT_EQUAL(O[j][i], want[i][j]);
            }
            mxu_array arr = {R, C, df, false, false};
            if (cycles != mxu_gemm_cycles(&arr, M, N, K)) {
                CU_FAIL("the RTL's cycles differ from mxu_gemm_cycles");
                fprintf(stderr, "%s %ux%u GEMM %ux%ux%u: RTL %llu, model %llu\n",
                        df == ARCH_DATAFLOW_WS ? "ws" : "is", R, C, M, N, K,
                        (unsigned long long)cycles,
                        (unsigned long long)mxu_gemm_cycles(&arr, M, N, K));
            }
        }
    }
}

template <class V> void check_os(unsigned R, unsigned C)
{
    for (const auto &s : shapes) {
        unsigned M = s[0], N = s[1], K = s[2];
        Mat A = operands(M, K, M * 131 + K), B = operands(K, N, N * 71 + K), O;
        uint64_t cycles = run_os<V>(R, C, A, B, O);
        CU_ASSERT(O == product(A, B));
        mxu_array arr = {R, C, ARCH_DATAFLOW_OS, false, false};
        if (cycles != mxu_gemm_cycles(&arr, M, N, K)) {
            CU_FAIL("the RTL's cycles differ from mxu_gemm_cycles");
            fprintf(stderr, "os %ux%u GEMM %ux%ux%u: RTL %llu, model %llu\n", R, C, M, N, K,
                    (unsigned long long)cycles,
                    (unsigned long long)mxu_gemm_cycles(&arr, M, N, K));
        }
    }
}

void weight_and_input_stationary_rtl_arrays_match_the_timing_model()
{
    check_ws_is<Vmxu_ws_4x4>(4, 4);
    check_ws_is<Vmxu_ws_3x5>(3, 5);
}

void output_stationary_rtl_arrays_match_the_timing_model()
{
    check_os<Vmxu_os_4x4>(4, 4);
    check_os<Vmxu_os_3x5>(3, 5);
}

const struct {
    const char *name;
    void (*fn)();
} tests[] = {
    {"weight_and_input_stationary_rtl_arrays_match_the_timing_model",
     weight_and_input_stationary_rtl_arrays_match_the_timing_model},
    {"output_stationary_rtl_arrays_match_the_timing_model",
     output_stationary_rtl_arrays_match_the_timing_model},
};

} // namespace

int main(int argc, char **argv)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite suite = CU_add_suite("rtl", nullptr, nullptr);
    for (const auto &t : tests)
        if (argc < 2 || !strcmp(argv[1], t.name))
            CU_add_test(suite, t.name, t.fn);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned ran = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    return failed || !ran ? 1 : 0;
}
