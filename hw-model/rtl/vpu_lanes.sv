// vpu_lanes.sv — one vector-unit lane group behind its in-order instruction queue, register
// level, for the Verilator test bench tests/tb_vpu_rtl.cpp, which checks it cycle for cycle
// against hw-model's timing (core_cost.c: ceil(elements / (lanes x ops per lane)) cycles).
//
// The queue holds DEPTH instructions (the one executing included, as the model's VPU queue
// does); the front end may push one per cycle while in_ready. The head executes alone, then
// the next: an instruction that arrives at an idle unit, or is next when the one before
// makes its last beat, starts beating in that same cycle.
//
// Beats: every cycle the head issues k of its remaining elements to the lanes (beat_count;
// elements beat_first .. beat_first + k - 1; operands on beat_a/beat_b lane by lane, results
// on beat_y in the same cycle, as the lanes' registered outputs are written at the edge):
//   - the elementwise class (add, mul, max): k = min(LANES x OPS, remaining);
//   - the transcendental class (here an integer square root, the stand-in for exp, sqrt, ...:
//     the class the ISA charges core.vector_transc_ops_per_lane = TR_NUM / TR_DEN per lane per
//     cycle): the lanes share TR_NUM / TR_DEN function evaluations each per cycle, kept as a
//     credit: + LANES x TR_NUM a cycle, TR_DEN an element; k = min(credit / TR_DEN, remaining).
//     After c cycles floor(c x LANES x TR_NUM / TR_DEN) elements are out, so E elements take
//     ceil(E x TR_DEN / (LANES x TR_NUM)) cycles, the model's ceil(E / (lanes x r)).
// An instruction starts in the first cycle it is the head (head_valid, beat_tag; a slow
// transcendental head may beat no element in a cycle); done_valid marks the cycle of its last
// beat: it completes at the next edge, where the next one starts.
// Values are 32-bit integers (add and mul wrap, max is signed, sqrt is of the unsigned value).
module vpu_lanes #(
    parameter int LANES  = 4,
    parameter int OPS    = 1,   // elementwise results per lane per cycle
    parameter int TR_NUM = 1,   // transcendental results per lane per cycle: TR_NUM / TR_DEN
    parameter int TR_DEN = 4,
    parameter int DEPTH  = 16,
    parameter int TAGW   = 16
) (
    input  logic                   clk,
    input  logic                   rst,
    // the front end's push
    input  logic                   in_valid,
    input  logic [TAGW-1:0]        in_tag,
    input  logic [1:0]             in_op,     // 0 add, 1 mul, 2 max, 3 sqrt (transcendental)
    input  logic [31:0]            in_elems,  // rows x cols, at least 1
    output logic                   in_ready,
    // the head of this cycle (it started in the first cycle it is the head) and its beat
    output logic                   head_valid,
    output logic                   beat_valid,
    output logic [TAGW-1:0]        beat_tag,
    output logic [31:0]            beat_first,
    output logic [31:0]            beat_count,
    input  logic [31:0]            beat_a [LANES*OPS],
    input  logic [31:0]            beat_b [LANES*OPS],
    output logic [31:0]            beat_y [LANES*OPS],
    output logic                   done_valid,
    output logic [TAGW-1:0]        done_tag
);
  localparam int W = LANES * OPS;
  localparam int QB = $clog2(DEPTH);

  logic [TAGW-1:0] q_tag  [DEPTH];
  logic [1:0]      q_op   [DEPTH];
  logic [31:0]     q_elems[DEPTH];
  logic [QB-1:0]   rd, wr;
  logic [QB:0]     count;
  logic            active;  // the head has beaten before
  logic [31:0]     left;    // its elements still to issue (valid while active)
  logic [31:0]     credit;  // its transcendental credit

  // the head: the oldest entry, or the one pushed now into an empty queue
  logic            h_valid;
  logic [TAGW-1:0] h_tag;
  logic [1:0]      h_op;
  logic [31:0]     h_elems, h_left, k, avail;

  function automatic logic [31:0] isqrt(input logic [31:0] v);
    logic [31:0] r = 0;
    for (int b = 15; b >= 0; b--) begin
      automatic logic [31:0] t = r | (32'd1 << b);
      if (t * t <= v) r = t;
    end
    return r;
  endfunction

  assign in_ready = count < (QB+1)'(DEPTH);
  always_comb begin
    h_valid = count != 0 || in_valid;
    h_tag   = count != 0 ? q_tag[rd] : in_tag;
    h_op    = count != 0 ? q_op[rd] : in_op;
    h_elems = count != 0 ? q_elems[rd] : in_elems;
    h_left  = active ? left : h_elems;
    avail   = h_op == 2'd3 ? (credit + 32'(LANES * TR_NUM)) / 32'(TR_DEN) : 32'(W);
    k       = h_valid ? (avail < h_left ? avail : h_left) : 32'd0;
    head_valid = h_valid;
    beat_valid = k != 0;
    beat_tag   = h_tag;
    beat_first = h_elems - h_left;
    beat_count = k;
    done_valid = h_valid && k == h_left;
    done_tag   = h_tag;
    for (int i = 0; i < W; i++) begin
      case (h_op)
        2'd0: beat_y[i] = beat_a[i] + beat_b[i];
        2'd1: beat_y[i] = beat_a[i] * beat_b[i];
        2'd2: beat_y[i] = $signed(beat_a[i]) > $signed(beat_b[i]) ? beat_a[i] : beat_b[i];
        default: beat_y[i] = isqrt(beat_a[i]);
      endcase
      if (32'(i) >= k) beat_y[i] = 32'd0;
    end
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      rd <= '0;
      wr <= '0;
      count <= '0;
      active <= 1'b0;
      left <= '0;
      credit <= '0;
    end else begin
      automatic logic push = in_valid && in_ready;
      automatic logic pop = h_valid && done_valid;
      if (push) begin
        q_tag[wr] <= in_tag;
        q_op[wr] <= in_op;
        q_elems[wr] <= in_elems;
        wr <= wr + 1'b1;
      end
      if (pop) rd <= rd + 1'b1;
      count <= count + (QB+1)'(push) - (QB+1)'(pop);
      if (pop) begin
        active <= 1'b0;
        credit <= '0;
      end else if (h_valid) begin
        active <= 1'b1;
        left <= h_left - k;
        if (h_op == 2'd3) credit <= credit + 32'(LANES * TR_NUM) - k * 32'(TR_DEN);
      end
    end
  end
endmodule
