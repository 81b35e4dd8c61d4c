// Draws Curate's charts with uPlot from JSON data blocks (data, not code,
// so the page's Content-Security-Policy allows them): the stats page's
// from <script type="application/json" id="stats-data">, and a fine-tuning
// job's loss, learning rate and gradient norm by step from its
// containers' data-loss attribute (an
// experiment's effect from data-effect), drawn again
// each time the job page's live part is swapped in. Every chart has a table beside it:
// without JavaScript the page still reads.
(function () {
  "use strict";
  var palette = ["#2f6fde", "#d1495b", "#2a9d5c", "#e08e0b", "#7b4fd6", "#0f8b8d", "#a05a2c", "#5c677d"];

  function el(kind) {
    return document.querySelector('.chart[data-chart="' + kind + '"]');
  }

  function size(target) {
    return { width: Math.max(280, target.clientWidth || 600), height: 220 };
  }

  function draw(target, series, data, yAxis, yRange, xAxis) {
    if (!target) return;
    var opts = size(target);
    opts.series = [xAxis ? xAxis.series : {}].concat(series);
    opts.axes = [xAxis ? xAxis.axis : {}, yAxis || {}];
    opts.scales = { x: { time: !xAxis } };
    if (xAxis && xAxis.range) opts.scales.x.range = xAxis.range;
    // Days are UTC days, as in the tables.
    opts.tzDate = function (ts) { return window.uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); };
    if (yRange) opts.scales.y = { range: yRange };
    if (xAxis && xAxis.hooks) opts.hooks = xAxis.hooks;
    target.textContent = "";
    var plot = new window.uPlot(opts, data, target);
    target.uplot = plot; // for the page's tests: what the chart drew
    var resize = function () {
      if (!target.isConnected) {
        window.removeEventListener("resize", resize);
        return;
      }
      plot.setSize(size(target));
    };
    window.addEventListener("resize", resize);
  }

  // A step axis: whole steps only, however few there are.
  function stepAxis() {
    var whole = function (u, v) { return v == null ? "—" : String(Math.round(v)); };
    return {
      series: { label: "Step", value: whole },
      axis: {
        label: "Step",
        incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000],
        values: function (u, ticks) { return ticks.map(function (t) { return String(Math.round(t)); }); }
      }
    };
  }

  // marks draws a dashed vertical line at each marked step (the kept
  // model, an early stop); the list under the chart says what each is.
  function marks(list) {
    return function (u) {
      if (!list || !list.length) return;
      var c = u.ctx, top = u.bbox.top, height = u.bbox.height;
      c.save();
      c.strokeStyle = "#7b4fd6";
      c.setLineDash([4, 4]);
      c.lineWidth = 1.5;
      list.forEach(function (m) {
        var x = Math.round(u.valToPos(m.step, "x", true));
        c.beginPath();
        c.moveTo(x, top);
        c.lineTo(x, top + height);
        c.stroke();
      });
      c.restore();
    };
  }

  function loss() {
    var target = el("ft-loss");
    var d = dataOf(target, "data-loss");
    if (!d) return;
    var fixed = function (u, v) { return v == null ? "—" : v.toFixed(4); };
    var x = stepAxis();
    x.hooks = { draw: [marks(d.marks)] };
    draw(target, [
      line("Training loss", 0, { value: fixed }),
      line("Validation loss", 1, { value: fixed, dash: [6, 3] })
    ], [d.step || [], d.train || [], d.valid || []], { label: "Loss" }, null, x);
  }

  // Every method's learning rate and gradient norm by step, each on its
  // own chart (their scales differ by orders of magnitude), from the same
  // data-loss as the loss chart.
  function optim() {
    var target = el("ft-lr");
    var d = dataOf(target, "data-loss");
    if (d) {
      var sci = function (u, v) { return v == null ? "—" : v.toExponential(2); };
      draw(target, [line("Learning rate", 4, { value: sci })], [d.step || [], d.lr || []], {
        label: "Learning rate",
        size: 70,
        values: function (u, ticks) { return ticks.map(function (t) { return t.toExponential(1); }); }
      }, null, stepAxis());
    }
    target = el("ft-grad-norm");
    d = dataOf(target, "data-loss");
    if (d) {
      var fixed = function (u, v) { return v == null ? "—" : v.toFixed(3); };
      draw(target, [line("Gradient norm", 5, { value: fixed })], [d.step || [], d.grad_norm || []], { label: "Gradient norm" }, null, stepAxis());
    }
  }

  // Two versions' losses by step on one chart, from the compare page's
  // data-curves attribute: A's lines solid, B's in another colour.
  function compareLoss() {
    var target = el("compare-loss");
    if (!target || !window.uPlot) return;
    var d;
    try {
      d = JSON.parse(target.getAttribute("data-curves"));
    } catch (e) {
      return;
    }
    var fixed = function (u, v) { return v == null ? "—" : v.toFixed(4); };
    draw(target, [
      line("A " + d.a + ": training", 0, { value: fixed }),
      line("A " + d.a + ": validation", 0, { value: fixed, dash: [6, 3] }),
      line("B " + d.b + ": training", 1, { value: fixed }),
      line("B " + d.b + ": validation", 1, { value: fixed, dash: [6, 3] })
    ], [d.step || [], d.a_train || [], d.a_valid || [], d.b_train || [], d.b_valid || []], { label: "Loss" }, null, stepAxis());
  }

  // An experiment's cumulative relative effect with its confidence
  // sequence, from the container's data-effect attribute: x is the time
  // since the phase's start in hours or days (d.unit), and the legend names
  // each point's moment in the page's own time zone.
  function effect() {
    var target = el("ab-effect");
    if (!target || !window.uPlot) return;
    var d;
    try {
      d = JSON.parse(target.getAttribute("data-effect"));
    } catch (e) {
      return;
    }
    var days = d.unit === "days";
    var seconds = days ? 86400 : 3600;
    var x = d.x || [];
    var last = x.length ? x[x.length - 1] : 0;
    var pct = function (u, v) { return v == null ? "—" : (v * 100).toFixed(1) + "%"; };
    var since = function (u, v) {
      if (v == null) return "—";
      var at = new Date((d.start + v * seconds) * 1000);
      return v.toFixed(1) + (days ? " days" : " hours") + " (" + at.toLocaleString([], { dateStyle: "medium", timeStyle: "short" }) + ")";
    };
    draw(target, [
      line("Relative effect", 0, { value: pct }),
      line("Lower bound", 1, { value: pct, dash: [6, 3], points: { show: false } }),
      line("Upper bound", 1, { value: pct, dash: [6, 3], points: { show: false } })
    ], [x, d.effect || [], d.low || [], d.high || []], {
      label: "Change",
      values: function (u, ticks) { return ticks.map(function (t) { return Math.round(t * 100) + "%"; }); }
    }, null, {
      series: { label: "Since the start", value: since },
      axis: { label: (days ? "Days" : "Hours") + " since the start" },
      range: [0, Math.max(1, last * 1.05)]
    });
  }

  function dataOf(target, attr) {
    if (!target || !window.uPlot) return null;
    try {
      return JSON.parse(target.getAttribute(attr));
    } catch (e) {
      return null;
    }
  }

  // A reward model's calibration: per bin of predicted probability, the
  // observed preference rate beside the mean prediction (the diagonal a
  // calibrated model follows), from data-calibration.
  function calibration() {
    var target = el("ft-calibration");
    var d = dataOf(target, "data-calibration");
    if (!d) return;
    var rate = function (u, v) { return v == null ? "—" : (v * 100).toFixed(1) + "%"; };
    draw(target, [
      line("Observed preference rate", 0, { value: rate }),
      line("Mean predicted probability", 1, { value: rate, dash: [6, 3] })
    ], [d.bin || [], d.observed || [], d.predicted || []], { label: "Preference rate" }, [0, 1], {
      series: { label: "Predicted probability", value: function (u, v) { return v == null ? "—" : v.toFixed(2); } },
      axis: { label: "Predicted probability" }
    });
  }

  // A GRPO or PPO run by step, from data-policy: the reward with the
  // held-out score, and the KL from the reference with the clip fraction.
  function policy() {
    var fixed = function (u, v) { return v == null ? "—" : v.toFixed(4); };
    var steps = stepAxis();
    var target = el("ft-policy-reward");
    var d = dataOf(target, "data-policy");
    if (d) {
      draw(target, [
        line("Reward", 0, { value: fixed }),
        line("Held-out score", 2, { value: fixed, dash: [6, 3] })
      ], [d.step || [], d.reward || [], d.heldout || []], { label: "Score" }, null, steps);
    }
    target = el("ft-policy-kl");
    d = dataOf(target, "data-policy");
    if (d) {
      draw(target, [
        line("KL from the reference", 1, { value: fixed }),
        line("Clip fraction", 3, { value: fixed, dash: [6, 3] })
      ], [d.step || [], d.kl || [], d.clip || []], {}, null, steps);
    }
  }

  // An RLAIF run's mean reward and each component's mean score by step,
  // from data-rlaif.
  function rlaif() {
    var target = el("ft-rlaif");
    var d = dataOf(target, "data-rlaif");
    if (!d) return;
    var fixed = function (u, v) { return v == null ? "—" : v.toFixed(3); };
    var series = [line("Reward", 0, { value: fixed, width: 3 })];
    var data = [d.step || [], d.reward || []];
    (d.components || []).forEach(function (c, i) {
      series.push(line(c.name, i + 1, { value: fixed, dash: [6, 3] }));
      data.push(c.values || []);
    });
    draw(target, series, data, { label: "Score" }, null, stepAxis());
  }

  function line(label, i, extra) {
    var s = { label: label, stroke: palette[i % palette.length], width: 2, spanGaps: true, points: { show: true, size: 4 } };
    for (var k in extra) s[k] = extra[k];
    return s;
  }

  function start() {
    loss();
    optim();
    compareLoss();
    effect();
    calibration();
    policy();
    rlaif();
    var block = document.getElementById("stats-data");
    if (!block || !window.uPlot) return;
    var d;
    try {
      d = JSON.parse(block.textContent);
    } catch (e) {
      return;
    }
    var x = d.x || [];

    draw(el("volume"), [
      line("Feedback", 0, { fill: "rgba(47,111,222,0.08)" }),
      line("Thumbs up", 2),
      line("Thumbs down", 1)
    ], [x, d.volume || [], d.thumbs_up || [], d.thumbs_down || []]);

    var models = d.models || [];
    var rateSeries = [], rateData = [x], avgSeries = [], avgData = [x];
    models.forEach(function (m, i) {
      rateSeries.push(line(m.name, i, { value: function (u, v) { return v == null ? "—" : (v * 100).toFixed(1) + "%"; } }));
      rateData.push(m.up_rate || []);
      avgSeries.push(line(m.name, i, { value: function (u, v) { return v == null ? "—" : v.toFixed(2); } }));
      avgData.push(m.avg_rating || []);
    });
    if (models.length > 0) {
      draw(el("up_rate"), rateSeries, rateData, {
        values: function (u, ticks) { return ticks.map(function (t) { return Math.round(t * 100) + "%"; }); }
      }, [0, 1]);
      draw(el("avg_rating"), avgSeries, avgData, {}, [1, 5]);
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
  // A running job's live part is swapped every few seconds with new data.
  // A swap brings an empty chart container; one already drawn is left.
  document.addEventListener("htmx:afterSettle", function () {
    var target = el("ft-loss");
    if (target && !target.firstChild) loss();
    target = el("ft-lr") || el("ft-grad-norm");
    if (target && !target.firstChild) optim();
    target = el("ft-calibration");
    if (target && !target.firstChild) calibration();
    target = el("ft-policy-reward");
    if (target && !target.firstChild) policy();
    target = el("ft-rlaif");
    if (target && !target.firstChild) rlaif();
  });
})();
