// mxu_os.sv — an output-stationary systolic array of R x C processing elements, register
// level, for the Verilator test bench tests/tb_mxu_rtl.cpp (see mxu_ws.sv).
//
// Every clock edge, in every PE (i, j): the left operand arrives from the left (a_left[i] at
// column 0) and moves right, the top operand arrives from above (b_top[j] at row 0) and
// moves down, and the PE adds their product to its accumulator (clear = 1: to 0 instead).
// The test bench skews both operands itself; the accumulators are the output tile.
module mxu_os #(
    parameter int R = 4,
    parameter int C = 4
) (
    input  logic               clk,
    input  logic               clear,
    input  logic signed [15:0] a_left [R],
    input  logic signed [15:0] b_top  [C],
    output logic signed [47:0] acc    [R][C]
);
  logic signed [15:0] a[R][C];
  logic signed [15:0] b[R][C];

  always_ff @(posedge clk) begin
    for (int i = 0; i < R; i++) begin
      for (int j = 0; j < C; j++) begin
        automatic logic signed [15:0] a_in = (j == 0) ? a_left[i] : a[i][j-1];
        automatic logic signed [15:0] b_in = (i == 0) ? b_top[j] : b[i-1][j];
        a[i][j]   <= a_in;
        b[i][j]   <= b_in;
        acc[i][j] <= (clear ? 48'sd0 : acc[i][j]) + 48'(a_in * b_in);
      end
    end
  end
endmodule
