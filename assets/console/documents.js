// The knowledge base: upload files (drag and drop or a file picker, through the multipart
// upload route), import a URL or crawl a site, write a text note, folders, search, and a
// status column that refreshes itself while documents move through the pipeline.

import { h, mount, field, input, textarea, select, checkbox, button, loading, empty, errorBox,
  form, table, pager, debounce, confirm, dialog, header, section, badge, fmtDate, toast, attempt } from './ui.js';

const LIMIT = 25;
const BUSY = ['pending_extraction', 'pending_optimization'];

export async function render(main, ctx) {
  const { api } = ctx;
  const admin = ctx.adminMode ? { adminMode: true } : {};
  let offset = 0;
  let folders = [];
  let poll = null;
  const search = input('searchTerm', '', { type: 'search', placeholder: 'Title or content' });
  const type = select('selectedType', [['all', 'All types'], 'text', 'url', 'website', 'youtube', 'pdf_upload', 'file_upload'], 'all');
  const folder = select('folderId', [['', 'All folders']], '');
  const results = h('div', { id: 'documents' }, loading());
  // Selected documents (ids) for the bulk bar; kept across pages until the filters change.
  const chosen = new Set();
  const bulk = h('div', { class: 'bulk', id: 'bulk', 'aria-live': 'polite' });
  const uploads = h('ul', { class: 'plain uploads', 'aria-live': 'polite' });

  const load = async (quiet) => {
    clearTimeout(poll);
    if (!quiet) mount(results, loading());
    try {
      const filters = { selectedType: type.value };
      if (search.value.trim()) filters.searchTerm = search.value.trim();
      if (folder.value) filters.folderId = folder.value;
      const d = await api.call('knowledge-base', 'all', null, { limit: LIMIT, offset, filters, ...admin });
      if (!ctx.alive()) return;
      if (!d.documents.length) {
        mount(results, empty(search.value ? 'No document matches.' : 'No documents yet. Upload a file, import a page or write a note.'));
        return;
      }
      const pick = (x) => h('input', { type: 'checkbox', class: 'pick', checked: chosen.has(x.id), 'aria-label': 'Select ' + x.name,
        onchange: (e) => { if (e.target.checked) chosen.add(x.id); else chosen.delete(x.id); drawBulk(); } });
      const cols = [
        ...(ctx.readOnly || ctx.adminMode ? [] : [['', pick]]),
        ['Name', (x) => x.name],
        ['Type', (x) => x.type],
        ['Status', (x) => h('span', { class: 'doc-status', 'data-name': x.name, 'data-status': x.status }, badge(x.status), x.error ? h('small', { class: 'doc-error' }, x.error) : null)],
        ['Folder', (x) => x.folder?.name || '—'],
        ['Size', (x) => x.size_bytes == null ? '—' : size(x.size_bytes)],
        ['Used by', (x) => (x.dependent_agents || []).map((a) => a.name).join(', ') || '—'],
        ['Updated', (x) => fmtDate(x.updated_at)],
      ];
      if (d.documents.some((x) => x.owner)) cols.splice(1, 0, ['Owner', (x) => x.owner?.email || '—']);
      if (!ctx.readOnly) cols.push(['', (x) => h('span', { class: 'row-actions' },
        ctx.adminMode ? null : moveControl(x),
        x.status === 'failed' ? button('Retry', async () => { if (await attempt(() => api.call('knowledge-base', 'retry', x.id, admin), 'Queued again.')) load(true); }, { class: 'small' }) : null,
        button('Delete', async () => {
          if (!(await confirm(`Delete “${x.name}”? Genies using it lose it.`))) return;
          if (await attempt(() => api.call('knowledge-base', 'delete', x.id, admin), 'Deleted.')) load(true);
        }, { class: 'small danger', 'aria-label': 'Delete ' + x.name }))]);
      mount(results, table(cols, d.documents, 'Documents'), pager(d.total, LIMIT, offset, (o) => { offset = o; load(); }));
      // Status updates by itself while anything is still being processed.
      if (d.documents.some((x) => BUSY.includes(x.status))) poll = setTimeout(() => ctx.alive() && load(true), 1500);
    } catch (e) {
      mount(results, errorBox(e));
    }
  };

  // Moves one document: `update` with `folder_id` (null is the top level).
  const moveControl = (x) => {
    const sel = select('folder_id', [['', 'Top level'], ...folders.map((f) => [f.id, f.name])], x.folder?.id || '', { class: 'small', 'aria-label': 'Folder of ' + x.name });
    sel.addEventListener('change', async () => {
      if (await attempt(() => api.call('knowledge-base', 'update', x.id, { folder_id: sel.value || null }), 'Moved.')) { loadFolders(); load(true); } else sel.value = x.folder?.id || '';
    });
    return sel;
  };

  const bulkUpdate = async (updates, text) => {
    const documentIds = [...chosen];
    const r = await attempt(() => api.call('knowledge-base', 'bulk-update', null, { documentIds, updates }));
    if (r) { toast(`${r.updatedCount} ${r.updatedCount === 1 ? 'document' : 'documents'} ${text}.`); chosen.clear(); drawBulk(); loadFolders(); load(true); }
  };
  const drawBulk = () => {
    if (!chosen.size) { mount(bulk); return; }
    const target = select('bulk_folder', [['', 'Top level'], ...folders.map((f) => [f.id, f.name])], '', { 'aria-label': 'Move the selected documents to' });
    mount(bulk, h('div', { class: 'card inline' },
      h('strong', {}, `${chosen.size} selected`),
      target, button('Move', () => bulkUpdate({ folder_id: target.value || null }, 'moved'), { class: 'small' }),
      button('Activate', () => bulkUpdate({ is_active: true }, 'activated'), { class: 'small' }),
      button('Deactivate', () => bulkUpdate({ is_active: false }, 'deactivated'), { class: 'small' }),
      button('Make public', () => bulkUpdate({ is_public: true }, 'made public'), { class: 'small' }),
      button('Make private', () => bulkUpdate({ is_public: false }, 'made private'), { class: 'small' }),
      button('Clear selection', () => { chosen.clear(); drawBulk(); load(true); }, { class: 'small' })));
  };

  // Passage search: the same full-text index the genies' knowledge base uses.
  const passages = h('div', { id: 'passages' });
  const passageForm = form([
    h('div', { class: 'grid' },
      field('Find passages', input('query', '', { type: 'search', required: true, placeholder: 'What do callers ask?' })),
      field('Results', input('limit', '5', { type: 'number', min: 1, max: 50 }))),
  ], 'Search', async (v) => {
    const d = await api.call('knowledge-base', 'search', null, { query: v.query, limit: Number(v.limit) || 5 });
    mount(passages, d.results.length ? h('ol', { class: 'plain passages' }, d.results.map((r) => h('li', { class: 'card' },
      h('h3', {}, r.document_name, h('small', { class: 'muted' }, ` · passage ${r.chunk_index + 1}`)),
      h('p', { class: 'wrap' }, r.content || r.snippet)))) : empty('No passage matches.'));
  }, { id: 'passage-form' });

  const loadFolders = async () => {
    folders = await api.call('document-folders', 'all').then((d) => d.folders).catch(() => []);
    mount(folder, h('option', { value: '' }, 'All folders'), h('option', { value: 'root' }, 'Not in a folder'),
      folders.map((f) => h('option', { value: f.id }, `${f.name} (${f.document_count})`)));
  };

  const sendFiles = async (files) => {
    for (const file of files) {
      const item = h('li', {}, file.name, ' — uploading…');
      uploads.append(item);
      try {
        const fields = {};
        if (folder.value && folder.value !== 'root') fields.folder_id = folder.value;
        const { document } = await api.upload(file, fields);
        mount(item, file.name, ' — uploaded, ', badge(document.status));
      } catch (e) {
        mount(item, file.name, ' — ', h('span', { class: 'error-text', role: 'alert' }, e.message));
      }
    }
    offset = 0;
    load(true);
  };

  const picker = h('input', { type: 'file', multiple: true, accept: '.pdf,.docx,.txt,.md,.markdown,.html,.htm', id: 'file-input', class: 'sr-only' });
  picker.addEventListener('change', () => { sendFiles([...picker.files]); picker.value = ''; });
  const drop = h('div', { class: 'drop', id: 'drop' },
    h('p', {}, 'Drop PDF, DOCX, TXT, Markdown or HTML files here, or '),
    h('label', { for: 'file-input', class: 'button', tabindex: '0', onkeydown: (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); picker.click(); } } }, 'choose files'),
    picker);
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => { e.preventDefault(); drop.classList.remove('over'); sendFiles([...e.dataTransfer.files]); });

  const folderOf = () => (folder.value && folder.value !== 'root' ? folder.value : undefined);
  const urlForm = form([
    field('Address', input('url', '', { type: 'url', placeholder: 'https://example.com/faq', required: true })),
    field('Import', select('mode', [['upload-website', 'This page only'], ['scrape-website', 'Crawl the site (same host)'], ['extract-youtube', 'YouTube transcript']], 'upload-website')),
    field('Pages at most (crawl)', input('max_pages', '10', { type: 'number', min: 1, max: 100 })),
  ], 'Import', async (v, f) => {
    const data = { url: v.url };
    if (v.mode === 'scrape-website') data.max_pages = Number(v.max_pages) || 10;
    await api.call('knowledge-base', 'create', null, { action: v.mode, data, folder_id: folderOf() });
    f.reset();
    toast('Import queued.');
    offset = 0; load(true);
  }, { id: 'url-form' });
  const noteForm = form([
    field('Title', input('title', '', { required: true })),
    field('Text', textarea('content', '', { rows: 5, required: true })),
    checkbox('is_public', 'Public (other users may read it)', false),
  ], 'Save note', async (v, f) => {
    await api.call('knowledge-base', 'create', null, { title: v.title, content: v.content, is_public: v.is_public, folder_id: folderOf() });
    f.reset();
    toast('Note saved.');
    offset = 0; load(true);
  }, { id: 'note-form' });

  const refilter = () => { offset = 0; chosen.clear(); drawBulk(); load(); };
  search.addEventListener('input', debounce(refilter));
  type.addEventListener('change', refilter);
  folder.addEventListener('change', refilter);

  mount(main,
    header('Knowledge base', ctx.readOnly ? null : button('New folder', () => newFolder(ctx).then((ok) => ok && loadFolders()))),
    ctx.readOnly ? null : h('div', { class: 'columns three' },
      section('Upload files', drop, uploads),
      section('Import from the web', urlForm),
      section('Write a note', noteForm)),
    h('div', { class: 'filters' }, field('Search', search), field('Type', type), field('Folder', folder)),
    bulk,
    results,
    section('Search passages', passageForm, passages));
  await loadFolders();
  await load();
}

function newFolder(ctx) {
  return dialog('New folder', (close) => form([
    field('Name', input('name', '', { required: true, maxlength: 100 })),
  ], 'Create folder', async (v) => {
    await ctx.api.call('document-folders', 'create', null, { name: v.name });
    toast('Folder created.');
    close(true);
  }));
}

function size(n) {
  if (n < 1024) return n + ' B';
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KB';
  return (n / 1024 / 1024).toFixed(1) + ' MB';
}
