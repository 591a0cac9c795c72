#pragma once

// The HTML page's one style sheet (core/report/html_page.cpp), inline in the
// page: system fonts only, greys and patterns that survive printing in black
// and white, and no rule that loads anything.

namespace air {

inline constexpr const char* k_html_style = R"css(
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:16px auto;max-width:1240px;padding:0 12px;color:#111;background:#fff}
h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:20px 0 6px;border-bottom:1px solid #999}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.status{padding:1px 8px;border:2px solid #111;border-radius:3px;font-size:15px}
.s-succeeded{border-style:solid}.status:not(.s-succeeded){border-style:double;border-width:4px;background:#fdd}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0}
dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}
.reason{font-weight:600;border-left:4px solid #111;padding-left:8px}
svg.chart{width:100%;height:auto;display:block}
svg text{font:11px system-ui,sans-serif;fill:#111}
.lane-bg{fill:#fff}.lane-bg.odd{fill:#f3f3f3}
.lane.outlier .lane-label{font-weight:700}
.span{fill:#cfe0f5;stroke:#3b6ea8;stroke-width:.6}
.lane[data-exit=failed] .span{fill:#f6d0d0;stroke:#a33}
.quiet{fill:url(#hatch);stroke:#555;stroke-width:.5}
.hatch{stroke:#333;stroke-width:1.5}.dot{fill:#555}
.rate{fill:none;stroke:#1d3f6e;stroke-width:1.4}
.marker{fill:#111;stroke:#111}.marker text{stroke:none}.marker .cross{stroke-width:2.2;fill:none;stroke:#b00}
.m-exit-ok circle{fill:#fff;stroke-width:1.6}.m-exit-stopped rect{fill:#888}
.m-first-step path{fill:#1d6e2f;stroke:none}.m-start rect{stroke:none}
.exit-label{font-weight:600}
.attempt rect{fill:#fff;stroke:#777;stroke-dasharray:4 3}.attempt.a1 rect{fill:url(#dots);fill-opacity:.35}
.attempt-label{font-weight:600}
.event line{stroke-width:2;stroke-dasharray:6 3}.event text{font-weight:700}
.hang line{stroke:#b00}.preemption line{stroke:#7a4b00;stroke-dasharray:2 2}
.tick{stroke:#ccc;stroke-width:.6}.tick-label{fill:#555;font-size:10px}
.gpu-line polyline{fill:none;stroke:#111;stroke-width:1.4}
.gpu-line .d1{stroke-dasharray:6 3}.gpu-line .d2{stroke-dasharray:1.5 2.5}.gpu-line .d3{stroke-dasharray:8 3 2 3}
figure{margin:8px 0}figcaption{font-weight:600}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border:1px solid #bbb;padding:2px 6px;text-align:left;vertical-align:top}
tr.e-failed td,tr.behind td{font-weight:600}
.legend,.grouped,footer{color:#333;font-size:12px}
@media print{body{max-width:none;margin:0}h2{break-after:avoid}section{break-inside:avoid}}
)css";

} // namespace air
