// Plots drawn as SVG, no library: lines over time, one per series, with a legend.

import { h } from "./view.js";

const COLORS = ["#2f5bd3", "#c0262d", "#1d7a46", "#a86200", "#7a53b8", "#2d8c8c", "#5f6b7a", "#d14f9a"];

export function color(index) {
  return COLORS[index % COLORS.length];
}

/**
 * Lines over time: `series` is [{ name, points: [[ms, value], ...] }] over the window `from`–`to`;
 * `format` labels the y axis, `label` is the plot's accessible name.
 */
export function linePlot(series, { label, format = String, from, to, width = 480, height = 220 } = {}) {
  const pad = { left: 70, right: 14, top: 12, bottom: 26 };
  const points = series.flatMap((line) => line.points);
  const svg = h("svg", { class: "plot", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label, width: "100%" });
  if (!points.length) {
    svg.append(h("text", { x: pad.left, y: height / 2 }, "No runs in this window."));
    return h("figure", {}, svg);
  }
  const xs = points.map(([x]) => x);
  const x0 = from ?? Math.min(...xs);
  const x1 = Math.max(to ?? Math.max(...xs), x0 + 1);
  const y1 = Math.max(1, ...points.map(([, y]) => y));
  const x = (value) => pad.left + ((value - x0) / (x1 - x0)) * (width - pad.left - pad.right);
  const y = (value) => height - pad.bottom - (value / y1) * (height - pad.top - pad.bottom);
  svg.append(
    h("line", { class: "axis", x1: pad.left, y1: y(0), x2: width - pad.right, y2: y(0) }),
    h("line", { class: "axis", x1: pad.left, y1: pad.top, x2: pad.left, y2: y(0) }),
    h("text", { x: pad.left - 6, y: pad.top + 10, "text-anchor": "end" }, format(y1)),
    h("text", { x: pad.left - 6, y: y(0), "text-anchor": "end" }, format(0)),
    h("text", { x: pad.left, y: height - 6 }, new Date(x0).toLocaleTimeString([], { hour12: false })),
    h("text", { x: width - pad.right, y: height - 6, "text-anchor": "end" }, new Date(x1).toLocaleTimeString([], { hour12: false })),
  );
  series.forEach((line, index) => {
    const coordinates = line.points.map(([px, py]) => `${x(px).toFixed(1)},${y(py).toFixed(1)}`).join(" ");
    svg.append(h("polyline", { points: coordinates, fill: "none", stroke: color(index), "stroke-width": 2 }));
    for (const [px, py] of line.points.filter(([, value]) => value > 0)) {
      svg.append(h("circle", { cx: x(px), cy: y(py), r: 2.5, fill: color(index) },
        h("title", {}, `${line.name}: ${format(py)} at ${new Date(px).toLocaleTimeString([], { hour12: false })}`)));
    }
  });
  const legend = h("figcaption", { class: "legend" }, series.map((line, index) => {
    const item = h("span", {}, line.name);
    item.style.setProperty("--swatch", color(index));
    return item;
  }));
  return h("figure", {}, svg, legend);
}
