// dma_issue.sv — the DMA engine's request issue, register level, for the Verilator test bench
// tests/tb_dma_rtl.cpp, which checks it cycle for cycle against hw-model's DMA queue (core.c:
// "Outstanding DMA requests", docs/hw-model.md "DMA engine").
//
// A ring of DEPTH entries (the model's DMA queue); the front end pushes one per cycle while
// in_ready, into slot in_slot. An entry is a copy or a sem.signal:
//   - copies START in program order while fewer than cfg_outstanding are in flight (a copy
//     holds its slot from its start until it completes); a copy pushed when it may start
//     starts in that cycle;
//   - a started copy is decoded by the one descriptor processor, one copy at a time, for
//     cfg_setup cycles (from the later of its start and the end of the previous decode); its
//     transfer request (req_mask) goes out when the decode ends, or in its start cycle when
//     cfg_setup is 0;
//   - the memory answers (rsp_mask: these slots' transfers are over; they complete now), in
//     any order;
//   - entries RETIRE in order: completed copies at the head, and a sem.signal once it is the
//     head with nothing before it (then the copies behind it may start, in the same cycle);
//     a copy never starts past a sem.signal that has not retired.
// Everything of one cycle happens in that cycle (the model's events of one instant): the
// memory's answers, the retirements they allow, the push (in_ready counts the slots those
// retirements free), the starts, and requests whose decode ends.
module dma_issue #(
    parameter int DEPTH = 16
) (
    input  logic             clk,
    input  logic             rst,
    input  logic [4:0]       cfg_outstanding, // 1 .. DEPTH copies in flight
    input  logic [7:0]       cfg_setup,       // decode cycles per copy
    // the front end's push
    input  logic             in_valid,
    input  logic             in_signal,       // 1: sem.signal, 0: dma.copy
    output logic             in_ready,
    output logic [3:0]       in_slot,
    output logic             in_retire,       // the pushed sem.signal retired as it came
    // memory
    input  logic [DEPTH-1:0] rsp_mask,
    output logic [DEPTH-1:0] req_mask,
    // what happened this cycle
    output logic [DEPTH-1:0] start_mask,
    output logic [DEPTH-1:0] retire_mask      // entries there before the push
);
  localparam int CW = $clog2(DEPTH) + 1;

  logic [3:0]       head;
  logic [CW-1:0]    count, started, inflight;
  logic [DEPTH-1:0] sig, done, pend;     // sem.signal; completed; started, not yet requested
  logic [31:0]      launch [DEPTH];      // when a pending request goes out
  logic [31:0]      now, decode_free;

  // the cycle's walk over the ring, in program order
  logic [3:0]       h;
  logic [CW-1:0]    cnt, ns, nf;
  logic [DEPTH-1:0] done_v, st, rt, sig_v;
  logic [31:0]      df, launch_v [DEPTH];
  logic             push;

  always_comb begin
    done_v = done | rsp_mask;
    sig_v = sig;
    nf = inflight - CW'($countones(rsp_mask));
    h = head;
    cnt = count;
    ns = started;
    rt = '0;
    st = '0;
    df = decode_free;
    launch_v = launch;
    // retire: completed copies at the head, a sem.signal at the head with nothing started
    for (int i = 0; i < DEPTH; i++) begin
      if (cnt != 0 && ((ns != 0 && done_v[h]) || (ns == 0 && sig[h]))) begin
        rt[h] = 1'b1;
        done_v[h] = 1'b0;
        if (ns != 0) ns = ns - 1'b1;
        h = h + 1'b1;
        cnt = cnt - 1'b1;
      end
    end
    in_ready = cnt < CW'(DEPTH);
    in_slot = h + cnt[3:0];
    retire_mask = rt;
    push = in_valid && in_ready;
    in_retire = 1'b0;
    if (push) begin
      sig_v[in_slot] = in_signal;
      cnt = cnt + 1'b1;
      if (in_signal && cnt == 1) begin // a signal into an empty queue retires at once
        in_retire = 1'b1;
        h = h + 1'b1;
        cnt = 0;
      end
    end
    // start: copies in order while slots are free, never past an unretired signal
    for (int i = 0; i < DEPTH; i++) begin
      automatic logic [3:0] p = h + ns[3:0];
      if (ns < cnt && nf < cfg_outstanding && !sig_v[p]) begin
        st[p] = 1'b1;
        ns = ns + 1'b1;
        nf = nf + 1'b1;
        if (cfg_setup != 0) begin
          df = (df > now ? df : now) + 32'(cfg_setup);
          launch_v[p] = df;
        end else begin
          launch_v[p] = now;
        end
      end
    end
    start_mask = st;
    for (int i = 0; i < DEPTH; i++)
      req_mask[i] = ((pend[i] || st[i]) && launch_v[i] == now);
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      head <= '0;
      count <= '0;
      started <= '0;
      inflight <= '0;
      sig <= '0;
      done <= '0;
      pend <= '0;
      now <= '0;
      decode_free <= '0;
    end else begin
      head <= h;
      count <= cnt;
      started <= ns;
      inflight <= nf;
      sig <= sig_v;
      done <= done_v & ~rt;
      pend <= (pend | st) & ~req_mask;
      launch <= launch_v;
      decode_free <= df;
      now <= now + 1;
    end
  end
endmodule
