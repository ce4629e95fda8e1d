// Analytics: the owner's figures over a range (conversations, success, leads, LLM cost) and
// one metric over time, drawn as an SVG bar chart (no chart library: a few dozen bars).

import { h, mount, field, select, loading, errorBox, header, section } from './ui.js';

const RANGES = [['24h', 'Last 24 hours'], ['7d', 'Last 7 days'], ['30d', 'Last 30 days'], ['90d', 'Last 90 days'], ['all', 'All time']];
const METRICS = [
  ['conversations', 'Conversations'], ['average_duration_seconds', 'Average duration (s)'],
  ['success_rate', 'Success rate'], ['leads', 'Leads'], ['conversion_rate', 'Conversion rate'],
  ['tokens', 'LLM tokens'], ['cost', 'Estimated LLM cost'],
];

const pct = (x) => (x === null || x === undefined ? '—' : `${(x * 100).toFixed(1)}%`);
const num = (x) => (x === null || x === undefined ? '—' : Number(x).toLocaleString());

function card(label, value, id) {
  return h('div', { class: 'stat card', id }, h('div', { class: 'muted' }, label), h('div', { class: 'stat-value' }, value));
}

/** Bars for the points; the tallest fills the height. Each bar's title tells its value. */
function chart(points, label) {
  const W = 720;
  const H = 180;
  const vals = points.map((p) => p.value ?? 0);
  const max = Math.max(...vals, 0);
  if (!points.length || max <= 0) return h('p', { class: 'muted', id: 'series-empty' }, 'Nothing happened in this range.');
  const bw = W / points.length;
  return h('svg:svg', { viewBox: `0 0 ${W} ${H + 20}`, class: 'chart', role: 'img', 'aria-label': label, id: 'series-chart' },
    points.map((p, i) => {
      const v = p.value ?? 0;
      const bh = (v / max) * H;
      return h('svg:rect', { x: (i * bw).toFixed(2), y: (H - bh).toFixed(2), width: Math.max(bw - 1, 0.5).toFixed(2), height: bh.toFixed(2), class: 'bar' },
        h('svg:title', {}, `${p.t}: ${p.value ?? '—'}`));
    }),
    h('svg:text', { x: 0, y: H + 16, class: 'axis' }, points[0].t),
    h('svg:text', { x: W, y: H + 16, class: 'axis', 'text-anchor': 'end' }, points[points.length - 1].t));
}

export async function render(main, ctx) {
  const { api } = ctx;
  const admin = ctx.adminMode ? { adminMode: true } : {};
  const range = select('dateRange', RANGES, '30d', { id: 'analytics-range' });
  const genies = await api.call('genies', 'all', null, { limit: 200, ...admin }).then((d) => d.genies).catch(() => []);
  const genie = select('genie_id', [['', 'All genies'], ...genies.map((g) => [g.id, g.name])], '', { id: 'analytics-genie' });
  const metric = select('metric', METRICS, 'conversations', { id: 'analytics-metric' });
  const interval = select('interval', [['day', 'By day'], ['hour', 'By hour']], 'day', { id: 'analytics-interval' });
  const overview = h('div', { id: 'analytics-overview' }, loading());
  const series = h('div', { id: 'analytics-series' }, loading());
  const scope = () => ({ dateRange: range.value, ...(genie.value ? { genie_id: genie.value } : {}), ...admin });

  const loadOverview = async () => {
    mount(overview, loading());
    try {
      const o = (await api.call('analytics', 'overview', null, scope())).overview;
      if (!ctx.alive()) return;
      const cost = o.llm.estimated_cost;
      mount(overview, h('div', { class: 'stats' },
        card('Conversations', num(o.conversations), 'stat-conversations'),
        card('Average duration', o.average_duration_seconds === null ? '—' : `${o.average_duration_seconds} s`, 'stat-duration'),
        card('Success rate', pct(o.success_rate), 'stat-success'),
        card('Leads', num(o.leads.total), 'stat-leads'),
        card('Converted', `${num(o.leads.converted)} (${pct(o.leads.conversion_rate)})`, 'stat-converted'),
        card('LLM tokens', num(o.llm.tokens_in + o.llm.tokens_out), 'stat-tokens'),
        card('Estimated LLM cost', cost && cost.amount !== null && cost.amount !== undefined ? `${cost.amount} ${cost.currency || ''}` : '—', 'stat-cost')));
    } catch (e) {
      mount(overview, errorBox(e));
    }
  };
  const loadSeries = async () => {
    mount(series, loading());
    try {
      const t = (await api.call('analytics', 'timeseries', null, { ...scope(), metric: metric.value, interval: interval.value })).timeseries;
      if (!ctx.alive()) return;
      mount(series, chart(t.points, `${metric.selectedOptions[0].textContent}, ${interval.value === 'day' ? 'by day' : 'by hour'}`));
    } catch (e) {
      mount(series, errorBox(e));
    }
  };
  const both = () => { loadOverview(); loadSeries(); };
  range.addEventListener('change', both);
  genie.addEventListener('change', both);
  metric.addEventListener('change', loadSeries);
  interval.addEventListener('change', loadSeries);

  mount(main,
    header('Analytics'),
    h('div', { class: 'filters' }, field('Range', range), field('Genie', genie)),
    overview,
    section('Over time', h('div', { class: 'filters' }, field('Metric', metric), field('Interval', interval)), series));
  both();
}
