// The SQL editor: CodeMirror 6 bound to the query's shared Y.Text (y-codemirror.next), with
// the other viewers' cursors, and the server's compile errors drawn at their span.

import { EditorState } from '@codemirror/state';
import { EditorView, keymap, lineNumbers, highlightActiveLine, drawSelection } from '@codemirror/view';
import { defaultKeymap, indentWithTab } from '@codemirror/commands';
import { syntaxHighlighting, defaultHighlightStyle, bracketMatching } from '@codemirror/language';
import { sql, SQLDialect } from '@codemirror/lang-sql';
import { setDiagnostics, lintGutter } from '@codemirror/lint';
import * as Y from 'yjs';
import { WebsocketProvider } from 'y-websocket';
import { yCollab, yUndoManagerKeymap } from 'y-codemirror.next';
import { token, wsBase } from './api.js';

// Spark SQL as streamfold reads it: backquoted names, Spark's types, and streamfold's
// iteration clauses (WITH ITERATIVE … TIMES n MODE …).
const SPARK = SQLDialect.define({
  keywords: 'select from where group by having order limit offset join inner left right full outer cross semi anti ' +
    'on using as and or not in exists between like rlike ilike is null true false case when then else end distinct ' +
    'all union intersect except minus with recursive iterative times mode exact differential diffusion key asc desc ' +
    'nulls first last over partition window rows range lateral view cast interval filter qualify any some div',
  types: 'int integer bigint smallint tinyint long double float real decimal numeric string varchar char boolean ' +
    'date timestamp timestamp_ntz timestamp_ltz array struct map binary',
  builtin: 'count sum avg min max abs round floor ceil sqrt exp ln log pow power coalesce nullif greatest least ' +
    'concat substring substr length lower upper trim explode size element_at year month day hour',
  identifierQuotes: '`',
  doubleQuotedStrings: true,
});

const COLORS = ['#d9480f', '#1971c2', '#2b8a3e', '#9c36b5', '#e67700', '#c2255c', '#0c8599'];

// A viewer's colour: their seat in the query's session when the server gave one (two viewers
// never share it), else a hash of the name (a chart's lines).
const seats = new Map();
export function seatColors(colors) {
  seats.clear();
  for (const [name, seat] of Object.entries(colors || {})) seats.set(name, seat);
}

export function viewerColor(name) {
  return seats.has(name) ? COLORS[seats.get(name) % COLORS.length] : colorFor(name);
}

export function colorFor(name) {
  let h = 0;
  for (const c of name) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return COLORS[h % COLORS.length];
}

export class SharedEditor {
  constructor(parent, queryId, user, onSynced) {
    this.doc = new Y.Doc();
    this.text = this.doc.getText('sql');
    this.provider = new WebsocketProvider(wsBase('/ws/doc'), queryId, this.doc, {
      params: { token }, disableBc: true,
    });
    this.user = user;
    this.setColor(colorFor(user));
    this.provider.on('sync', (synced) => { if (synced && onSynced) onSynced(); });
    const undoManager = new Y.UndoManager(this.text);
    this.view = new EditorView({
      parent,
      state: EditorState.create({
        doc: this.text.toString(),
        extensions: [
          lineNumbers(), drawSelection(), highlightActiveLine(), bracketMatching(),
          syntaxHighlighting(defaultHighlightStyle), sql({ dialect: SPARK, upperCaseKeywords: true }),
          lintGutter(), EditorView.lineWrapping,
          keymap.of([...yUndoManagerKeymap, ...defaultKeymap, indentWithTab]),
          yCollab(this.text, this.provider.awareness, { undoManager }),
          // Everyone's name stays over their cursor (y-codemirror shows it on hover only), with
          // room above the first line for it.
          EditorView.theme({
            '.cm-ySelectionInfo': { opacity: 1, fontFamily: 'system-ui, sans-serif', padding: '0 3px' },
            '.cm-content': { paddingTop: '1em' },
          }),
        ],
      }),
    });
    this.error = null;
  }

  // Our cursor's colour, as the other pages see it (set again once the server seats us).
  setColor(color) {
    this.provider.awareness.setLocalStateField('user', { name: this.user, color, colorLight: color + '33' });
  }

  get value() {
    return this.view.state.doc.toString();
  }

  // Draw a compile result, if it is for the text now in the editor (else a newer one follows).
  showCompile(result) {
    if (!result || result.text !== this.value) return false;
    const err = result.error;
    const diagnostics = [];
    if (err && err.span) {
      const [from, to] = err.span;
      const max = this.view.state.doc.length;
      diagnostics.push({
        from: Math.min(from, max), to: Math.min(to, max), severity: 'error', source: err.code,
        message: `[${err.code}] ${err.message}` + (err.hint ? `\nhint: ${err.hint}` : ''),
      });
    }
    this.view.dispatch(setDiagnostics(this.view.state, diagnostics));
    return true;
  }

  destroy() {
    this.provider.destroy();
    this.view.destroy();
    this.doc.destroy();
  }
}
