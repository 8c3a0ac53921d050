# L1 lexeme specification for grammars/postgres.y (see grammars/README.md).
# One declaration per line. Order of the non-SKIP lines follows the %token header of
# postgres.y, but only the names matter for the one-to-one match.

# PostgreSQL 15 reserved keywords (Appendix C, "reserved").
%reserved all analyse analyze and any array as asc asymmetric both case cast check collate
%reserved column constraint create current_catalog current_date current_role current_time
%reserved current_timestamp current_user default deferrable desc distinct do else end except
%reserved false fetch for foreign from grant group having in initially intersect into lateral
%reserved leading limit localtime localtimestamp not null offset on only or order placing
%reserved primary references returning select session_user some symmetric table then to
%reserved trailing true union unique user using variadic when where window with
# PostgreSQL 15 keywords that are "reserved (can be function or type)".
%reserved authorization binary collation concurrently cross current_schema freeze full ilike
%reserved inner is isnull join left like natural notnull outer overlaps right similar
%reserved tablesample verbose
# Reserved in the reference parser (libpg_query for PostgreSQL 15): system_user.
%reserved system_user
# Not reserved in PostgreSQL, but words the checker's parser (sqlparser) cannot read as an
# identifier (a qualifier, an alias, a CTE name, a bare column): the checker must read every
# statement of the language (crates/grid-pgref), so they are spelled quoted only.
%reserved cube exists recursive rollup top trim unnest

# Words a bare label (an alias without AS: of a select item, a FROM item, an UPDATE or
# DELETE target) may not be, besides the reserved ones: PostgreSQL's AS_LABEL keywords, SET
# after an UPDATE or DELETE target (PostgreSQL reads it as the keyword), and the words
# sqlparser cannot read there. With AS, each may be an alias.
%bare_label_denied char character day filter hour minute month over precision second
%bare_label_denied varying within without year set
%bare_label_denied between cluster distribute div exclude explain glob match member minus
%bare_label_denied operator regexp rlike sort values view xor anti asof connect format
%bare_label_denied match_condition match_recognize open output partition pivot prewhere
%bare_label_denied qualify semi settings unpivot

# Punctuation and operators.
TOK LPAREN \(
TOK RPAREN \)
TOK COMMA ,
TOK DOT \.
TOK SEMI ;
TOK STAR \*
TOK PLUS \+
TOK MINUS -
TOK SLASH /
TOK PERCENT %
TOK CARET \^
TOK EQ =
TOK NE <>|!=
TOK LT <
TOK LE <=
TOK GT >
TOK GE >=
TOK CONCAT \|\|
TOK TYPECAST ::
TOK LBRACKET \[
TOK RBRACKET \]

# Literals. One meaning under every setting a session can change (docs/security.md):
# - STRING holds no backslash. PostgreSQL reads '\' as a whole string only while
#   standard_conforming_strings is on; any role may turn it off, and then the backslash
#   escapes the quote and what the dialect saw as a string's end is code.
# - ESTRING reads backslashes the same under both settings, but \' fails under
#   backslash_quote = off (and under safe_encoding with some client encodings): a quote
#   inside it is written '', never \'.
# - Neither holds a control character but tab and line feed: a carriage return, an
#   escape or a backspace in a literal can make the text look like another statement on
#   a terminal or in the audit.
# - In generated SQL (the extension's dialect, Shape::GENERATED in dialect.rs) every
#   lexeme is also valid UTF-8 without a C1 control, a format character (U+200B, U+202E,
#   ...) or a line or paragraph separator (crates/grid-core/src/text.rs, HIDDEN), and a
#   quoted name holds no control byte at all: these classes stay over bytes, which that
#   rule narrows. The full dialect, which reads what people wrote, takes them.
# - The refused ones are lexemes of their own (STRING_UNSAFE, ESTRING_UNSAFE below), not
#   bytes where the scanner stops: a literal is scanned to its closing quote either way.
TOK STRING '(?:[^'\\\x00-\x08\x0b-\x1f\x7f]|'')*'
TOK ESTRING [eE]'(?:[^'\\\x00-\x08\x0b-\x1f\x7f]|\\[^'\x00-\x08\x0b-\x1f\x7f]|'')*'
TOK INTEGER [0-9]+
# What PostgreSQL's lexer reads as an integer constant (ICONST): an INTEGER whose value fits
# in 32 bits (a larger one is a numeric constant, FCONST). Its grammar takes only ICONST
# in a type's length or precision and in CURRENT_TIME(n) and the like: LOCALTIME(2660127536)
# is a syntax error there.
TOK ICONST 0*(?:[0-9]{1,9}|1[0-9]{9}|20[0-9]{8}|21[0-3][0-9]{7}|214[0-6][0-9]{6}|2147[0-3][0-9]{5}|21474[0-7][0-9]{4}|214748[0-2][0-9]{3}|2147483[0-5][0-9]{2}|21474836[0-3][0-9]|214748364[0-7])
%within ICONST INTEGER
# float(p): PostgreSQL's grammar refuses a precision outside 1 to 53 while it parses
# (22023, "precision for type float must be less than 54 bits").
TOK FLOAT_PREC 0*(?:[1-9]|[1-4][0-9]|5[0-3])
%within FLOAT_PREC INTEGER
TOK DECIMAL (?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+
# Numeric literals: no lexeme boundary falls between one and a letter or `_` (`98.n` is
# refused): PostgreSQL 15 reads `98.` and the label `n`, 16 refuses it ("trailing junk
# after numeric literal").
%numeric INTEGER DECIMAL ICONST FLOAT_PREC
# The fields EXTRACT(field FROM x) knows (PostgreSQL's grammar takes any identifier that is
# not a keyword there, and YEAR ... SECOND; its analysis only these).
TOK EXTRACT_FIELD (?i:century|day|decade|dow|doy|epoch|hour|isodow|isoyear|julian|microseconds|millennium|milliseconds|minute|month|quarter|second|timezone|timezone_hour|timezone_minute|week|year)

# The decline's reason (`CANNOT ANSWER 'reason'`, postgres.y's decline_statement): a
# quoted string of plain words, 1 to 200 characters: letters, digits, spaces and
# . , ; : ! ? ( ) / _ -, the first a letter or a digit. No quote inside (so no '' either),
# no backslash, no tab, line feed or other control character, nothing beyond ASCII. Every
# such lexeme is also a STRING; the parser takes it only after CANNOT ANSWER, where a
# STRING is not taken, so a string with anything else there is refused. Kept in step with
# grid_core::statement::decline_of.
TOK DECLINE_REASON '[A-Za-z0-9][A-Za-z0-9 .,;:!?()/_-]{0,199}'
# Every reason is a STRING: where a reason is not wanted, the automaton's states that tell
# a string that may still be a reason from one that may not are one to the mask's walk
# (grid_core::scan::absorbing_run), so the decline costs ordinary strings nothing.
%within DECLINE_REASON STRING

# Identifiers.
ID TABLE_NAME table
ID INSERT_TABLE insert_table
ID UPDATE_TABLE update_table
ID DELETE_TABLE delete_table
ID COLUMN_NAME column
ID FUNC_NAME function
ID TYPE_NAME type
ID IDENT free
ID BARE_LABEL bare_label
ID CTE_REF cte
ID ALIAS_REF output_alias
ID DERIVED_COL derived_column
ID QUALIFIER qualifier
ID QUAL_COL qualified_column
ID SCOPED_COL scoped_column

# Keywords.
KW ALL all
KW AND and
KW ANY any
KW ARRAY array
KW AS as
KW ASC asc
KW ASYMMETRIC asymmetric
KW AT at
KW BETWEEN between
KW BIGINT bigint
KW BOOLEAN boolean
KW BOTH both
KW BY by
KW CASE case
KW CAST cast
KW CHAR char
KW CHARACTER character
KW COALESCE coalesce
KW CONFLICT conflict
KW CROSS cross
KW CUBE cube
KW CURRENT current
KW CURRENT_DATE current_date
KW CURRENT_TIME current_time
KW CURRENT_TIMESTAMP current_timestamp
KW DECIMAL_P decimal
KW DEFAULT default
KW DELETE delete
KW DESC desc
KW DISTINCT distinct
KW DO do
KW DOUBLE double
KW ELSE else
KW END end
KW ESCAPE escape
KW EXCEPT except
KW EXCLUDE exclude
KW EXISTS exists
KW EXTRACT extract
KW FALSE false
KW FETCH fetch
KW FILTER filter
KW FIRST first
KW FLOAT float
KW FOLLOWING following
KW FOR for
KW FROM from
KW FULL full
KW GREATEST greatest
KW GROUP group
KW GROUPING grouping
KW GROUPS groups
KW HAVING having
KW ILIKE ilike
KW IN in
KW INNER inner
KW INSERT insert
KW INT int
KW INTEGER_P integer
KW INTERSECT intersect
KW INTERVAL interval
KW INTO into
KW IS is
KW ISNULL isnull
KW JOIN join
KW LAST last
KW LATERAL lateral
KW LEADING leading
KW LEAST least
KW LEFT left
KW LIKE like
KW LIMIT limit
KW LOCALTIME localtime
KW LOCALTIMESTAMP localtimestamp
KW MATERIALIZED materialized
KW NATURAL natural
KW NEXT next
KW NO no
KW NOT not
KW NOTHING nothing
KW NOTNULL notnull
KW NULL null
KW NULLIF nullif
KW NULLS nulls
KW NUMERIC numeric
KW OFFSET offset
KW ON on
KW ONLY only
KW OR or
KW ORDER order
KW OTHERS others
KW OUTER outer
KW OVER over
KW PARTITION partition
KW POSITION position
KW PRECEDING preceding
KW PRECISION precision
KW RANGE range
KW REAL real
KW RECURSIVE recursive
KW RETURNING returning
KW RIGHT right
KW ROLLUP rollup
KW ROW row
KW ROWS rows
KW SELECT select
KW SET set
KW SETS sets
KW SIMILAR similar
KW SMALLINT smallint
KW SOME some
KW SUBSTRING substring
KW SYMMETRIC symmetric
KW THEN then
KW TIES ties
KW TIME time
KW TIMESTAMP timestamp
KW TO to
KW TRAILING trailing
KW TRIM trim
KW TRUE true
KW UNBOUNDED unbounded
KW UNION union
KW UNKNOWN unknown
KW UPDATE update
KW USING using
KW VALUES values
KW VARCHAR varchar
KW VARYING varying
KW WHEN when
KW WHERE where
KW WINDOW window
KW WITH with
KW WITHIN within
KW WITHOUT without
KW ZONE zone
# The decline's words: not reserved (they are no keywords of PostgreSQL), so `cannot` and
# `answer` stay names everywhere but at the start of a statement.
KW CANNOT cannot
KW ANSWER answer

# Lexemes that PostgreSQL reads as one operator where the dialect would read two
# (`a||-1` is the operator `||-`, which a role may create; PostgreSQL only splits a
# trailing + or - off an operator made of + - * / < > = alone): scanned, so that maximal
# munch matches PostgreSQL's, and taken by no parser state.
NEVER MERGED_OPERATOR (?:\|\||\^|%|!=)[+\-]+
# Literals with what STRING and ESTRING leave out (a backslash in a standard string; \'
# or a control character in an escape string): scanned whole, so that the scanner never
# stops inside a literal, and refused.
NEVER STRING_UNSAFE '(?:[^']|'')*[\\\x00-\x08\x0b-\x1f\x7f](?:[^']|'')*'
NEVER ESTRING_UNSAFE [eE]'(?:[^'\\]|\\(?s:.)|'')*(?:\\'|\\[\x00-\x08\x0b-\x1f\x7f]|[\x00-\x08\x0b-\x1f\x7f])(?:[^'\\]|\\(?s:.)|'')*'
# A quoted name with a control byte, which generated SQL's names never hold (Shape::GENERATED
# in dialect.rs; the full dialect's names take any byte but the quote, as PostgreSQL's):
# scanned whole and refused, so that the scanner never stops inside a quoted name.
NEVER QUOTED_UNSAFE "(?:[^"]|"")*[\x00-\x1f\x7f](?:[^"]|"")*"
# A quoted name longer than 63 bytes, which PostgreSQL reads as one and truncates: scanned
# whole and refused. Without it such a body is alive only as QUOTED_UNSAFE (which a control
# byte could still end), and dies on any byte after a `"`: the search for a cut-back then
# tries every detour through it, at every byte.
NEVER QUOTED_LONG "(?:[^"]|""){64,}"
# A number followed by a letter after its dot (`1.x`, `1.e`): PostgreSQL 16 refuses it
# ("trailing junk after numeric literal"), 15 reads `1.` and the label `x`.
# (Without the dot, `1x` is already refused: a lexeme never ends between two word
# characters.)
NEVER NUMERIC_JUNK [0-9]+\.(?:[A-Za-z_]|[^\x00-\x7f])

# Ignored. Whitespace is space, tab and line feed: no form feed, vertical tab or carriage
# return in returned SQL.
SKIP WS [ \t\n]+
# Comments as PostgreSQL 15's lexer ends them (the extension's dialect has none): a line
# comment ends at a line feed or a carriage return (where PostgreSQL reads on as code; a
# carriage return is no whitespace here, so it is refused); block comments nest in
# PostgreSQL, so one holds no `/*` (with it, PostgreSQL reads on past the first `*/`).
SKIP LINE_COMMENT --[^\n\r]*
SKIP BLOCK_COMMENT /\*(?:[^*/]|\*+[^*/]|/+[^*/])*\*+/
