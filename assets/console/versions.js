// A genie's history and its safety net: versions (compare, roll back), the draft (stage a
// prompt, compare, publish with or without tests, discard), the A/B traffic split with
// per-version figures, and test conversations (create, run, results). Shown on the genie's
// page; every change goes through the same API actions a client would call.

import { h, mount, field, input, textarea, select, checkbox, button, loading, empty, errorBox,
  form, table, confirm, dialog, badge, fmtDate, toast, attempt } from './ui.js';

const show = (v) => (v === null || v === undefined ? '—' : typeof v === 'object' ? JSON.stringify(v) : String(v));

function changesTable(changes) {
  if (!changes.length) return empty('No differences.');
  return table([
    ['Field', (c) => h('code', {}, c.path)],
    ['From', (c) => h('span', { class: 'diff-from' }, show(c.from))],
    ['To', (c) => h('span', { class: 'diff-to' }, show(c.to))],
  ], changes, 'Changes');
}

/** `onLive(genie)` is told when the live genie changed (rollback, publish): the page redraws. */
export function versionsSection(ctx, genie, onLive) {
  const { api } = ctx;
  const ro = ctx.readOnly;
  const id = genie.id;
  const box = h('div', { id: 'versions' }, loading());
  const tests = h('div', { id: 'genie-tests' }, loading());

  const diffDialog = async (from, to) => {
    const d = await attempt(() => api.call('genies', 'diff', id, { from, to }));
    if (!d) return;
    await dialog(`Changes from ${d.from} to ${d.to}`, () => changesTable(d.changes));
  };

  const draw = async () => {
    let d;
    let stats = [];
    try {
      [d, stats] = await Promise.all([
        api.call('genies', 'versions', id),
        api.call('genies', 'version-stats', id).then((x) => x.stats).catch(() => []),
      ]);
    } catch (e) {
      mount(box, errorBox(e));
      return;
    }
    const live = d.versions.find((v) => v.live);
    const parts = [];

    // The draft: what is staged, and what may be done with it.
    if (d.draft) {
      parts.push(h('div', { class: 'notice', id: 'draft-box' },
        h('p', {}, `A draft based on version ${d.draft.base_version} is staged (${fmtDate(d.draft.updated_at)}).`),
        h('div', { class: 'actions' },
          button('Compare with live', () => diffDialog(live ? live.version : 1, 'draft')),
          ro ? null : button('Publish…', () => publish(), { class: 'primary', id: 'publish-draft' }),
          ro ? null : button('Discard', async () => {
            if (!(await confirm('Discard the draft? The live genie does not change.', 'Discard'))) return;
            if (await attempt(() => api.call('genies', 'discard-draft', id), 'Draft discarded.')) draw();
          }, { class: 'danger', id: 'discard-draft' }))));
    }
    if (!ro) parts.push(stageForm());

    parts.push(d.versions.length ? table([
      ['Version', (v) => h('span', {}, String(v.version), ' ', v.live ? badge('live', 'active') : null)],
      ['When', (v) => fmtDate(v.created_at)],
      ['Summary', (v) => v.summary || '—'],
      ['', (v) => h('span', { class: 'order' },
        v.live ? null : button('Compare', () => diffDialog(v.version, live.version), { class: 'small', 'aria-label': `Compare version ${v.version} with live` }),
        ro || v.live ? null : button('Roll back', async () => {
          if (!(await confirm(`Make version ${v.version} live again? It is recorded as a new version and pushed to the voice platform.`, 'Roll back'))) return;
          const r = await attempt(() => api.call('genies', 'rollback', id, { version: v.version }), `Rolled back to version ${v.version}.`);
          if (r) onLive(r.genie);
        }, { class: 'small', 'aria-label': `Roll back to version ${v.version}` }))],
    ], d.versions, 'Versions') : empty('No versions yet.'));

    // Traffic between versions, and how each version did.
    const split = d.traffic && d.traffic.length
      ? h('p', { id: 'traffic-now' }, 'New page conversations are split: ', d.traffic.map((t) => `version ${t.version} ${t.weight}%`).join(', '), '.')
      : h('p', { class: 'muted', id: 'traffic-now' }, 'No split: the live version serves every conversation.');
    parts.push(h('h3', {}, 'Traffic'), split);
    if (!ro && d.versions.length > 1) parts.push(trafficForm(d));
    if (stats.length) {
      parts.push(table([
        ['Version', (s) => (s.version === null ? 'unsplit' : String(s.version))],
        ['Conversations', (s) => String(s.conversations)],
        ['Avg. duration (s)', (s) => show(s.average_duration_seconds)],
        ['Success share', (s) => (s.successful_share === null ? '—' : `${Math.round(s.successful_share * 100)}%`)],
      ], stats, 'Figures per version'));
    }
    mount(box, parts);

    function publish() {
      return dialog('Publish the draft', (close) => form([
        field('Note', input('note', '', { maxlength: 500, placeholder: 'What changed, for the history' })),
        checkbox('require_tests', 'Run this genie’s tests against the draft first; publish only if all pass', false),
      ], 'Publish', async (v) => {
        const data = {};
        if (v.note.trim()) data.note = v.note.trim();
        if (v.require_tests) data.require_tests = true;
        const r = await api.call('genies', 'publish', id, data);
        toast(`Version ${r.version} is live.`);
        close(true);
        onLive(r.genie);
      }, { id: 'publish-form' }));
    }
  };

  function stageForm() {
    return h('details', {},
      h('summary', {}, 'Stage a change as a draft'),
      form([
        field('System prompt', textarea('system_prompt', genie.system_prompt, { rows: 6 })),
        field('First message', textarea('first_message', genie.first_message, { rows: 2 })),
      ], 'Save draft', async (v) => {
        const data = { draft: true };
        if (v.system_prompt !== (genie.system_prompt ?? '')) data.system_prompt = v.system_prompt;
        if (v.first_message !== (genie.first_message ?? '')) data.first_message = v.first_message;
        if (Object.keys(data).length === 1) { toast('Nothing changed.'); return; }
        await api.call('genies', 'update', id, data);
        toast('Draft saved; the live genie is unchanged.');
        draw();
      }, { id: 'draft-form' }));
  }

  function trafficForm(d) {
    const opts = d.versions.map((v) => [String(v.version), `version ${v.version}${v.live ? ' (live)' : ''}`]);
    const cur = d.traffic || [];
    const a = select('a', opts, String(cur[0]?.version ?? d.versions[0].version));
    const b = select('b', opts, String(cur[1]?.version ?? d.versions[1].version));
    return h('div', {},
      form([
        h('div', { class: 'grid' },
          field('Version A', a),
          field('Share of A (%)', input('weight', cur[0]?.weight ?? 50, { type: 'number', min: 0, max: 100, required: true })),
          field('Version B', b)),
      ], 'Split traffic', async (v) => {
        const w = Number(v.weight);
        const traffic = [{ version: Number(v.a), weight: w }, { version: Number(v.b), weight: 100 - w }];
        await api.call('genies', 'set-traffic', id, { traffic });
        toast('Traffic split saved.');
        draw();
      }, { id: 'traffic-form' }),
      cur.length ? button('Remove the split', async () => {
        if (await attempt(() => api.call('genies', 'set-traffic', id, { traffic: [] }), 'Split removed.')) draw();
      }, { id: 'traffic-clear' }) : null);
  }

  const drawTests = async () => {
    let list;
    let runs;
    try {
      [list, runs] = await Promise.all([
        api.call('genie-tests', 'all', null, { genie_id: id }).then((x) => x.tests),
        api.call('genie-tests', 'runs', null, { genie_id: id, limit: 20 }).then((x) => x.runs),
      ]);
    } catch (e) {
      mount(tests, errorBox(e));
      return;
    }
    const name = (tid) => list.find((t) => t.id === tid)?.name || tid;
    const queued = runs.some((r) => r.status === 'queued' || r.status === 'running');
    mount(tests,
      list.length ? table([
        ['Test', (t) => t.name],
        ['User', (t) => (t.turns ? `${t.turns.length} scripted turn(s)` : 'simulated')],
        ['Criteria', (t) => t.criteria.map((c) => c.type + (c.value ? ` “${c.value}”` : '')).join(', ')],
        ['', (t) => h('span', { class: 'order' },
          ro ? null : button('Run', async () => {
            if (await attempt(() => api.call('genie-tests', 'run', t.id), 'Run queued.')) drawTests();
          }, { class: 'small', 'aria-label': 'Run ' + t.name }),
          ro ? null : button('Delete', async () => {
            if (!(await confirm(`Delete the test “${t.name}” and its runs?`))) return;
            if (await attempt(() => api.call('genie-tests', 'delete', t.id), 'Test deleted.')) drawTests();
          }, { class: 'small danger', 'aria-label': 'Delete ' + t.name }))],
      ], list, 'Tests') : empty('No tests yet.'),
      ro || !list.length ? null : button('Run all tests', async () => {
        if (await attempt(() => api.call('genie-tests', 'run-all', null, { genie_id: id }), 'Runs queued.')) drawTests();
      }, { id: 'run-all-tests' }),
      ro ? null : newTest(),
      runs.length ? h('div', {},
        h('h3', {}, 'Recent runs'),
        table([
          ['Test', (r) => name(r.test_id)],
          ['Against', (r) => String(r.target)],
          ['Status', (r) => badge(r.status, r.status === 'passed' ? 'active' : r.status === 'failed' || r.status === 'error' ? 'failed' : '')],
          ['Details', (r) => (r.results || []).filter((x) => !x.passed).map((x) => `${x.type}: ${x.reason || 'failed'}`).join('; ') || r.error || '—'],
          ['When', (r) => fmtDate(r.finished_at || r.created_at)],
        ], runs, 'Test runs'),
        queued ? button('Refresh', () => drawTests(), { id: 'refresh-runs' }) : null) : null);
  };

  function newTest() {
    return h('details', {},
      h('summary', {}, 'New test'),
      form([
        field('Name', input('name', '', { required: true, maxlength: 200 })),
        field('What the user says', textarea('turns', '', { rows: 3, required: true }), 'one turn per line'),
        field('The genie must say', input('contains', '', { placeholder: 'e.g. opening hours' })),
        field('The genie must not say', input('not_contains', '')),
      ], 'Create test', async (v) => {
        const turns = v.turns.split('\n').map((s) => s.trim()).filter(Boolean);
        const criteria = [];
        if (v.contains.trim()) criteria.push({ type: 'contains', value: v.contains.trim() });
        if (v.not_contains.trim()) criteria.push({ type: 'not_contains', value: v.not_contains.trim() });
        await api.call('genie-tests', 'create', null, { genie_id: id, name: v.name, turns, criteria });
        toast('Test created.');
        drawTests();
      }, { id: 'test-form' }));
  }

  draw();
  drawTests();
  return h('div', {}, box, h('h3', {}, 'Test conversations'), tests);
}
