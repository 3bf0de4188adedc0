// mxu_ws.sv — a weight-stationary systolic array of R x C processing elements, register
// level, for the Verilator test bench tests/tb_mxu_rtl.cpp, which checks the cycle counts of
// hw-model/mxu_timing.c (and SCALE-Sim's) against it. It also serves the input-stationary
// dataflow: the test bench swaps the operands.
//
// Every clock edge, in every PE (r, c):
//   - load = 1: the stationary operand shifts down one row, w_top[c] entering row 0, so R
//     edges fill the array (the preload);
//   - the streamed operand arrives from the left (a_left[r] at column 0, else what PE
//     (r, c - 1) took the edge before) and is passed on to the right;
//   - the partial sum from the PE above (0 in row 0) plus arriving operand x stationary
//     operand is registered and passed down; the bottom row's sums leave as psum_out.
// The test bench skews the streamed rows itself (row r one edge after row r - 1).
module mxu_ws #(
    parameter int R = 4,
    parameter int C = 4
) (
    input  logic               clk,
    input  logic               load,
    input  logic signed [15:0] w_top    [C],
    input  logic signed [15:0] a_left   [R],
    output logic signed [47:0] psum_out [C]
);
  logic signed [15:0] w[R][C];
  logic signed [15:0] a[R][C];
  logic signed [47:0] p[R][C];

  always_ff @(posedge clk) begin
    for (int r = 0; r < R; r++) begin
      for (int c = 0; c < C; c++) begin
        automatic logic signed [15:0] a_in = (c == 0) ? a_left[r] : a[r][c-1];
        automatic logic signed [47:0] p_in = (r == 0) ? 48'sd0 : p[r-1][c];
        if (load) w[r][c] <= (r == 0) ? w_top[c] : w[r-1][c];
        a[r][c] <= a_in;
        p[r][c] <= p_in + 48'(a_in * w[r][c]);
      end
    end
  end

  for (genvar c = 0; c < C; c++) begin : g_out
    assign psum_out[c] = p[R-1][c];
  end
endmodule
