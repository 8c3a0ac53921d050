%start stmt_list
%token LPAREN RPAREN COMMA DOT SEMI STAR PLUS MINUS SLASH PERCENT CARET EQ NE LT LE GT GE
    CONCAT TYPECAST LBRACKET RBRACKET STRING ESTRING INTEGER DECIMAL TABLE_NAME
    INSERT_TABLE UPDATE_TABLE DELETE_TABLE COLUMN_NAME FUNC_NAME TYPE_NAME IDENT CTE_REF
    ALL AND ANY ARRAY AS ASC ASYMMETRIC AT BETWEEN BIGINT BOOLEAN BOTH BY CASE CAST CHAR
    CHARACTER COALESCE CONFLICT CROSS CUBE CURRENT CURRENT_DATE CURRENT_TIME
    CURRENT_TIMESTAMP DECIMAL_P DEFAULT DELETE DESC DISTINCT DO DOUBLE ELSE END ESCAPE
    EXCEPT EXCLUDE EXISTS EXTRACT FALSE FETCH FILTER FIRST FLOAT FOLLOWING FOR FROM FULL
    GREATEST GROUP GROUPING GROUPS HAVING ILIKE IN INNER INSERT INT INTEGER_P INTERSECT
    INTERVAL INTO IS ISNULL JOIN LAST LATERAL LEADING LEAST LEFT LIKE LIMIT LOCALTIME
    LOCALTIMESTAMP MATERIALIZED NATURAL NEXT NO NOT NOTHING NOTNULL NULL NULLIF NULLS
    NUMERIC OFFSET ON ONLY OR ORDER OTHERS OUTER OVER PARTITION POSITION PRECEDING
    PRECISION RANGE REAL RECURSIVE RETURNING RIGHT ROLLUP ROW ROWS SELECT SET SETS SIMILAR
    SMALLINT SOME SUBSTRING SYMMETRIC THEN TIES TIME TIMESTAMP TO TRAILING TRIM TRUE
    UNBOUNDED UNION UNKNOWN UPDATE USING VALUES VARCHAR VARYING WHEN WHERE WINDOW WITH
    WITHIN WITHOUT ZONE ALIAS_REF DERIVED_COL BARE_LABEL EXTRACT_FIELD QUALIFIER QUAL_COL
    CANNOT ANSWER DECLINE_REASON SCOPED_COL ICONST FLOAT_PREC

/*
 * Precedence, lowest first, after PostgreSQL 15 gram.y. Differences:
 * - PostgreSQL turns NOT before LIKE, ILIKE, SIMILAR, BETWEEN or IN into the token
 *   NOT_LA, ranked with LIKE. Here NOT itself is on the LIKE line: after an expression,
 *   NOT can only begin one of those forms, so that is the same decision, and
 *   "a LIKE b NOT LIKE c" is refused as in PostgreSQL. Prefix NOT gets %prec AND: no
 *   token lies between AND and the PostgreSQL NOT level, and NOT a AND b reduces either
 *   way, so this equals the separate PostgreSQL right-associative NOT level.
 * - LBRACKET stands in for the pseudo-token UMINUS (a %prec name must be a real
 *   terminal here): it ranks unary minus and plus above CARET and below TYPECAST, and
 *   the scalar subquery below RPAREN so that ((SELECT 1)) is one nested query.
 * - RPAREN ranks above it for the same reason (PostgreSQL: the line with parentheses).
 * - JOIN and friends are left associative so that a CROSS or NATURAL join followed by
 *   another join groups to the left. ON and USING share their level.
 * - A JOIN is qualified (ON, USING), NATURAL or CROSS, as in PostgreSQL, which refuses
 *   "a JOIN b" alone (SQLite reads it as a cross join; two Spider gold lines do).
 */
%left UNION EXCEPT
%left INTERSECT
%left OR
%left AND
%nonassoc IS ISNULL NOTNULL
%nonassoc LT GT EQ LE GE NE
%nonassoc BETWEEN IN LIKE ILIKE SIMILAR NOT
%nonassoc ESCAPE
%left CONCAT
%left PLUS MINUS
%left STAR SLASH PERCENT
%left CARET
%left AT
%right LBRACKET
%left RPAREN
%left TYPECAST
%left JOIN CROSS LEFT FULL RIGHT INNER NATURAL ON USING

%%

/* ------------------------------------------------------------------ statements */

stmt_list: statement opt_semi ;

opt_semi: SEMI | %empty ;

statement: select_statement
    | insert_statement
    | update_statement
    | delete_statement
    | decline_statement
    ;

select_statement: select_stmt ;

/* The decline: not SQL, the model's sanctioned way to say that it cannot answer from what
   the role may read, with a short reason in plain words (DECLINE_REASON, postgres.lex):
   CANNOT ANSWER 'the role can read no table about salaries'. No verb: every projection
   keeps it, and no ban removes it. CANNOT and ANSWER are keywords only here: they are not
   reserved, so a name spelled `cannot` or `answer` is still an identifier everywhere else.
   A finished output of this form is read by grid_core::statement::decline_of; the
   checker and the judge never see it. */
decline_statement: CANNOT ANSWER DECLINE_REASON ;

/* ------------------------------------------------------------------ SELECT */

select_stmt@: select_no_parens@
    | select_with_parens@
    ;

/* A parenthesized query is plain (a SELECT, VALUES or set operation, in parentheses) or
   carries options (ORDER BY, LIMIT, OFFSET, FETCH, WITH). PostgreSQL merges the options of
   a query around a parenthesized one into it and refuses two of a kind ("multiple ORDER BY
   clauses not allowed", the same for LIMIT, OFFSET and WITH), so only a plain one takes
   options from outside (select_clause_plain) and follows a WITH: a narrowing (PostgreSQL
   takes "(SELECT 1 ORDER BY 1) LIMIT 1"), checked against its parser. */
select_with_parens@: select_with_parens_plain@ %prec LBRACKET
    | select_with_parens_opts@ %prec LBRACKET
    ;

select_with_parens_plain@: LPAREN simple_select@ RPAREN
    | LPAREN select_with_parens_plain@ RPAREN
    ;

select_with_parens_opts@: LPAREN select_no_parens_opts@ RPAREN
    | LPAREN select_with_parens_opts@ RPAREN
    ;

select_no_parens@: simple_select@
    | select_no_parens_opts@
    ;

/* FETCH ... WITH TIES needs an ORDER BY at the same level (sorted_limit). */
select_no_parens_opts@: select_clause_plain@ query_sort_clause@
    | select_clause_plain@ query_sort_clause@ sorted_limit
    | select_clause_plain@ select_limit
    | with_clause select_clause_plain_w
    | with_clause select_clause_plain_w query_sort_clause_w
    | with_clause select_clause_plain_w query_sort_clause_w sorted_limit
    | with_clause select_clause_plain_w select_limit
    ;

select_clause_plain@: simple_select@
    | select_with_parens_plain@
    ;

select_clause@: simple_select@
    | select_with_parens@
    ;

/* A WINDOW clause needs a FROM clause (the checker's parser reads it only after one). */
simple_select@: SELECT opt_distinct@ target_list@ where_clause@ group_clause@ having_clause@
    | SELECT opt_distinct@ target_list@ from_clause@ where_clause@ group_clause@ having_clause@ window_clause@
    | values_clause@
    | select_clause@ UNION set_quantifier select_clause@
    | select_clause@ INTERSECT set_quantifier select_clause@
    | select_clause@ EXCEPT set_quantifier select_clause@
    ;

set_quantifier: ALL | DISTINCT | %empty ;

/* Every nested query used as an expression or a FROM item goes through subquery. */
subquery@: select_with_parens@ %prec LBRACKET ;

/* WITH: the CTE bodies are _w, so a CTE may read earlier CTEs and itself (RECURSIVE). */
with_clause: WITH cte_list
    | WITH RECURSIVE cte_list
    ;

cte_list: common_table_expr
    | cte_list COMMA common_table_expr
    ;

common_table_expr: IDENT opt_name_list AS opt_materialized LPAREN select_stmt_w RPAREN ;

opt_materialized: MATERIALIZED
    | NOT MATERIALIZED
    | %empty
    ;

opt_name_list: LPAREN name_list RPAREN | %empty ;

name_list: IDENT
    | name_list COMMA IDENT
    ;

column_list: COLUMN_NAME
    | column_list COMMA COLUMN_NAME
    ;

opt_distinct@: ALL
    | DISTINCT
    | DISTINCT ON LPAREN expr_list@ RPAREN
    | %empty
    ;

target_list@: target_el@
    | target_list@ COMMA target_el@
    ;

/* An alias without AS is a BARE_LABEL: not every word PostgreSQL takes after AS. */
target_el@: a_expr@ AS IDENT
    | a_expr@ BARE_LABEL
    | a_expr@
    | STAR
    | IDENT DOT STAR
    ;

values_clause@: VALUES LPAREN values_list@ RPAREN
    | values_clause@ COMMA LPAREN values_list@ RPAREN
    ;

values_list@: values_item@
    | values_list@ COMMA values_item@
    ;

values_item@: a_expr@ | DEFAULT ;

/* ------------------------------------------------------------------ FROM */

from_clause@: FROM from_list@ ;

opt_from_clause: from_clause | %empty ;

from_list@: table_ref@
    | from_list@ comma_join@
    ;

comma_join@: COMMA table_ref@ ;

/* A subquery in FROM has an alias: PostgreSQL 15, which runs the statements, refuses
   one without (16 allows it; two Spider gold lines omit it). */
table_ref@: TABLE_NAME opt_alias_clause
    | CTE_REF opt_alias_clause /*only_w*/
    | subquery@ alias_clause
    | LATERAL subquery@ alias_clause
    | joined_table@
    | LPAREN joined_table@ RPAREN alias_clause
    ;

joined_table@: LPAREN joined_table@ RPAREN
    | table_ref@ CROSS JOIN table_ref@
    | table_ref@ join_type JOIN table_ref@ join_qual@
    | table_ref@ JOIN table_ref@ join_qual@
    | table_ref@ NATURAL join_type JOIN table_ref@
    | table_ref@ NATURAL JOIN table_ref@
    ;

join_type: FULL opt_outer
    | LEFT opt_outer
    | RIGHT opt_outer
    | INNER
    ;

opt_outer: OUTER | %empty ;

join_qual@: USING LPAREN column_list RPAREN
    | ON a_expr@
    ;

opt_alias_clause: alias_clause | %empty ;

alias_clause: AS IDENT LPAREN name_list RPAREN
    | AS IDENT
    | BARE_LABEL LPAREN name_list RPAREN
    | BARE_LABEL
    ;

/* ------------------------------------------------------------------ other clauses */

where_clause@: WHERE a_expr@ | %empty ;

group_clause@: GROUP BY group_by_list@ | %empty ;

group_by_list@: group_by_item@
    | group_by_list@ COMMA group_by_item@
    ;

/* ALIAS_REF: an output column name of this SELECT (the dynamic lexicon), as PostgreSQL
   allows a whole GROUP BY item to name one. */
group_by_item@: a_expr@
    | ALIAS_REF
    | LPAREN RPAREN
    | ROLLUP LPAREN expr_list@ RPAREN
    | CUBE LPAREN expr_list@ RPAREN
    | GROUPING SETS LPAREN group_by_list@ RPAREN
    ;

having_clause@: HAVING a_expr@ | %empty ;

window_clause@: WINDOW window_def_list@ | %empty ;

window_def_list@: window_def@
    | window_def_list@ COMMA window_def@
    ;

window_def@: IDENT AS window_specification@ ;

opt_sort_clause@: sort_clause@ | %empty ;

sort_clause@: ORDER BY sortby_list@ ;

/* The ORDER BY of a query, whose whole items may also name its output columns (ALIAS_REF,
   the dynamic lexicon); an aggregate's or a window's ORDER BY may not. */
query_sort_clause@: ORDER BY query_sortby_list@ ;

query_sortby_list@: query_sortby@
    | query_sortby_list@ COMMA query_sortby@
    ;

query_sortby@: sortby@
    | ALIAS_REF opt_asc_desc opt_nulls_order
    ;

sortby_list@: sortby@
    | sortby_list@ COMMA sortby@
    ;

sortby@: a_expr@ opt_asc_desc opt_nulls_order ;

opt_asc_desc: ASC | DESC | %empty ;

opt_nulls_order: NULLS FIRST
    | NULLS LAST
    | %empty
    ;

select_limit: limit_clause offset_clause
    | offset_clause limit_clause
    | limit_clause
    | offset_clause
    ;

limit_clause: LIMIT INTEGER
    | LIMIT ALL
    | FETCH first_or_next opt_fetch_count row_or_rows ONLY
    ;

sorted_limit: select_limit
    | with_ties_clause
    | with_ties_clause offset_clause
    | offset_clause with_ties_clause
    ;

with_ties_clause: FETCH first_or_next opt_fetch_count row_or_rows WITH TIES ;

offset_clause: OFFSET INTEGER
    | OFFSET INTEGER row_or_rows
    ;

opt_fetch_count: INTEGER | %empty ;

first_or_next: FIRST | NEXT ;

row_or_rows: ROW | ROWS ;

/* ------------------------------------------------------------------ expressions */

/* ISNULL and NOTNULL are PostgreSQL's postfix IS NULL and IS NOT NULL, at IS's level (not in
   b_expr, as there). The checker's parser (sqlparser) reads NOTNULL, and ISNULL once the
   checker has written it IS NULL (checker.rs, `tokens`). Both words are reserved, so no
   bare label spells one: "SELECT a notnull" is the operator, as in PostgreSQL. */
a_expr@: c_expr@
    | a_expr@ TYPECAST typename
    | a_expr@ AT TIME ZONE a_expr@ %prec AT
    | PLUS a_expr@ %prec LBRACKET
    | MINUS a_expr@ %prec LBRACKET
    | a_expr@ PLUS a_expr@
    | a_expr@ MINUS a_expr@
    | a_expr@ STAR a_expr@
    | a_expr@ SLASH a_expr@
    | a_expr@ PERCENT a_expr@
    | a_expr@ CARET a_expr@
    | a_expr@ LT a_expr@
    | a_expr@ GT a_expr@
    | a_expr@ EQ a_expr@
    | a_expr@ LE a_expr@
    | a_expr@ GE a_expr@
    | a_expr@ NE a_expr@
    | a_expr@ CONCAT a_expr@
    | a_expr@ AND a_expr@
    | a_expr@ OR a_expr@
    | NOT a_expr@ %prec AND
    | a_expr@ LIKE a_expr@
    | a_expr@ LIKE a_expr@ ESCAPE a_expr@ %prec LIKE
    | a_expr@ NOT LIKE a_expr@ %prec LIKE
    | a_expr@ NOT LIKE a_expr@ ESCAPE a_expr@ %prec LIKE
    | a_expr@ ILIKE a_expr@
    | a_expr@ ILIKE a_expr@ ESCAPE a_expr@ %prec ILIKE
    | a_expr@ NOT ILIKE a_expr@ %prec ILIKE
    | a_expr@ NOT ILIKE a_expr@ ESCAPE a_expr@ %prec ILIKE
    | a_expr@ SIMILAR TO a_expr@ %prec SIMILAR
    | a_expr@ SIMILAR TO a_expr@ ESCAPE a_expr@ %prec SIMILAR
    | a_expr@ NOT SIMILAR TO a_expr@ %prec SIMILAR
    | a_expr@ NOT SIMILAR TO a_expr@ ESCAPE a_expr@ %prec SIMILAR
    | a_expr@ IS NULL %prec IS
    | a_expr@ ISNULL
    | a_expr@ IS NOT NULL %prec IS
    | a_expr@ NOTNULL
    | a_expr@ IS TRUE %prec IS
    | a_expr@ IS NOT TRUE %prec IS
    | a_expr@ IS FALSE %prec IS
    | a_expr@ IS NOT FALSE %prec IS
    | a_expr@ IS UNKNOWN %prec IS
    | a_expr@ IS NOT UNKNOWN %prec IS
    | a_expr@ IS DISTINCT FROM a_expr@ %prec IS
    | a_expr@ IS NOT DISTINCT FROM a_expr@ %prec IS
    | a_expr@ BETWEEN b_expr@ AND a_expr@ %prec BETWEEN
    | a_expr@ NOT BETWEEN b_expr@ AND a_expr@ %prec BETWEEN
    | a_expr@ IN in_expr@
    | a_expr@ NOT IN in_expr@ %prec IN
    | a_expr@ subquery_op sub_type subquery@ %prec EQ
    | a_expr@ subquery_op sub_type LPAREN a_expr@ RPAREN %prec EQ
    | a_expr@ like_op ANY subquery@ %prec EQ
    | a_expr@ like_op ANY LPAREN a_expr@ RPAREN %prec EQ
    | a_expr@ like_op some_or_all LPAREN a_expr@ RPAREN %prec EQ
    ;

/* The restricted expression of a BETWEEN lower bound and of POSITION: no AND, no IN; and,
   narrower than PostgreSQL's, no comparison and no IS DISTINCT FROM, which the checker's
   parser (sqlparser) cannot read there ("x BETWEEN a <> b AND c"; parenthesized, they are
   fine). */
b_expr@: c_expr@
    | b_expr@ TYPECAST typename
    | PLUS b_expr@ %prec LBRACKET
    | MINUS b_expr@ %prec LBRACKET
    | b_expr@ PLUS b_expr@
    | b_expr@ MINUS b_expr@
    | b_expr@ STAR b_expr@
    | b_expr@ SLASH b_expr@
    | b_expr@ PERCENT b_expr@
    | b_expr@ CARET b_expr@
    | b_expr@ CONCAT b_expr@
    ;

subquery_op: EQ | NE | LT | LE | GT | GE ;

sub_type: ANY | SOME | ALL ;

/* LIKE and ILIKE take a subquery after ANY only: the checker's parser reads no other
   quantifier there (a parenthesized expression takes any). */
like_op: LIKE
    | ILIKE
    | NOT LIKE
    | NOT ILIKE
    ;

some_or_all: SOME | ALL ;

in_expr@: subquery@
    | LPAREN expr_list@ RPAREN
    ;

c_expr@: columnref
    | a_const
    | LPAREN a_expr@ RPAREN
    | case_expr@
    | func_expr@
    | subquery@
    | EXISTS subquery@
    | ARRAY subquery@
    | ARRAY LBRACKET expr_list@ RBRACKET
    | ARRAY LBRACKET RBRACKET
    | implicit_row@
    | ROW LPAREN expr_list@ RPAREN
    | ROW LPAREN RPAREN
    ;

/* Where a FROM clause in force is still to come (a select list, DISTINCT ON, an INSERT,
   UPDATE or DELETE; the parser's stacks say which, crates/grid-core/src/qualifier.rs), a
   bare column is COLUMN_NAME (any column of the lexicon) or DERIVED_COL (a column the
   statement named of a derived table, a CTE or a relation renamed by a column alias list,
   in scope here: the dynamic lexicon), and a qualified one IDENT DOT ... . Everywhere
   else, a bare column is SCOPED_COL, a column of a range variable in scope there, and a
   qualified one QUALIFIER DOT QUAL_COL, a range variable in scope there and a column of
   it (the dynamic lexicon). */
columnref: COLUMN_NAME
    | IDENT DOT COLUMN_NAME
    | DERIVED_COL
    | IDENT DOT DERIVED_COL
    | QUALIFIER DOT QUAL_COL
    | SCOPED_COL
    ;

implicit_row@: LPAREN expr_list@ COMMA a_expr@ RPAREN ;

expr_list@: a_expr@
    | expr_list@ COMMA a_expr@
    ;

a_const: INTEGER
    | DECIMAL
    | STRING
    | ESTRING
    | TRUE
    | FALSE
    | NULL
    | TYPE_NAME STRING
    | const_datetime STRING
    | INTERVAL STRING
    ;

case_expr@: CASE case_arg@ when_clause_list@ case_default@ END ;

case_arg@: a_expr@ | %empty ;

when_clause_list@: when_clause@
    | when_clause_list@ when_clause@
    ;

when_clause@: WHEN a_expr@ THEN a_expr@ ;

case_default@: ELSE a_expr@ | %empty ;

/* ------------------------------------------------------------------ functions */

func_expr@: func_application@ within_group_clause@ filter_clause@ over_clause@
    | func_expr_common@
    ;

func_application@: FUNC_NAME LPAREN RPAREN
    | FUNC_NAME LPAREN expr_list@ opt_sort_clause@ RPAREN
    | FUNC_NAME LPAREN ALL expr_list@ opt_sort_clause@ RPAREN
    | FUNC_NAME LPAREN DISTINCT expr_list@ opt_sort_clause@ RPAREN
    | FUNC_NAME LPAREN STAR RPAREN
    ;

within_group_clause@: WITHIN GROUP LPAREN sort_clause@ RPAREN | %empty ;

filter_clause@: FILTER LPAREN WHERE a_expr@ RPAREN | %empty ;

over_clause@: OVER window_specification@
    | OVER IDENT
    | %empty
    ;

/* No existing window name inside the parentheses: the checker's parser reads none that
   is one of its keywords ("OVER w" names one). */
window_specification@: LPAREN opt_partition_clause@ opt_sort_clause@ opt_frame_clause@ RPAREN ;

opt_partition_clause@: PARTITION BY expr_list@ | %empty ;

opt_frame_clause@: RANGE frame_extent@ opt_window_exclusion
    | ROWS frame_extent@ opt_window_exclusion
    | GROUPS frame_extent@ opt_window_exclusion
    | %empty
    ;

frame_extent@: frame_bound@
    | BETWEEN frame_bound@ AND frame_bound@
    ;

frame_bound@: UNBOUNDED PRECEDING
    | UNBOUNDED FOLLOWING
    | CURRENT ROW
    | a_expr@ PRECEDING
    | a_expr@ FOLLOWING
    ;

/* No EXCLUDE: the checker's parser reads no frame exclusion. */
opt_window_exclusion: %empty ;

/* Functions with keyword syntax, and left() / right(), whose names are keywords that
   are reserved except as function names, so FUNC_NAME never matches them. */
func_expr_common@: CAST LPAREN a_expr@ AS typename RPAREN
    | EXTRACT LPAREN extract_arg FROM a_expr@ RPAREN
    | COALESCE LPAREN expr_list@ RPAREN
    | NULLIF LPAREN a_expr@ COMMA a_expr@ RPAREN
    | GREATEST LPAREN expr_list@ RPAREN
    | LEAST LPAREN expr_list@ RPAREN
    | GROUPING LPAREN expr_list@ RPAREN
    | LEFT LPAREN expr_list@ RPAREN
    | RIGHT LPAREN expr_list@ RPAREN
    | CURRENT_DATE
    | CURRENT_TIME
    | CURRENT_TIME LPAREN ICONST RPAREN
    | CURRENT_TIMESTAMP
    | CURRENT_TIMESTAMP LPAREN ICONST RPAREN
    | LOCALTIME
    | LOCALTIME LPAREN ICONST RPAREN
    | LOCALTIMESTAMP
    | LOCALTIMESTAMP LPAREN ICONST RPAREN
    | POSITION LPAREN b_expr@ IN b_expr@ RPAREN
    | SUBSTRING LPAREN a_expr@ FROM a_expr@ RPAREN
    | SUBSTRING LPAREN a_expr@ FROM a_expr@ FOR a_expr@ RPAREN
    | SUBSTRING LPAREN a_expr@ FOR a_expr@ RPAREN
    | SUBSTRING LPAREN expr_list@ RPAREN
    | TRIM LPAREN trim_spec a_expr@ FROM a_expr@ RPAREN
    | TRIM LPAREN trim_spec a_expr@ RPAREN
    | TRIM LPAREN a_expr@ FROM a_expr@ RPAREN
    | TRIM LPAREN a_expr@ RPAREN
    | TRIM LPAREN a_expr@ COMMA a_expr@ RPAREN
    ;

extract_arg: EXTRACT_FIELD | STRING ;

trim_spec: BOTH | LEADING | TRAILING ;

/* ------------------------------------------------------------------ types */

typename: simple_typename opt_array_bounds ;

opt_array_bounds: opt_array_bounds LBRACKET RBRACKET | %empty ;

/* No type modifier on an identifier type (none of the lexicon's takes one, and the
   checker's parser cannot read some). */
simple_typename: TYPE_NAME
    | INT
    | INTEGER_P
    | SMALLINT
    | BIGINT
    | REAL
    | FLOAT
    | FLOAT LPAREN FLOAT_PREC RPAREN
    | DOUBLE PRECISION
    | DECIMAL_P opt_type_mod
    | NUMERIC opt_type_mod
    | BOOLEAN
    | CHARACTER opt_varying opt_type_len
    | CHAR opt_varying opt_type_len
    | VARCHAR opt_type_len
    | const_datetime
    | INTERVAL
    ;

opt_type_mod: LPAREN INTEGER RPAREN
    | LPAREN INTEGER COMMA INTEGER RPAREN
    | %empty
    ;

opt_type_len: LPAREN ICONST RPAREN | %empty ;

opt_varying: VARYING | %empty ;

const_datetime: TIMESTAMP opt_time_prec opt_timezone
    | TIME opt_time_prec opt_timezone
    ;

opt_time_prec: LPAREN ICONST RPAREN | %empty ;

opt_timezone: WITH TIME ZONE
    | WITHOUT TIME ZONE
    | %empty
    ;

/* ------------------------------------------------------------------ INSERT, UPDATE, DELETE */

insert_statement: INSERT INTO INSERT_TABLE opt_insert_alias insert_rest opt_on_conflict returning_clause ;

opt_insert_alias: AS IDENT | %empty ;

insert_rest: insert_query
    | LPAREN column_list RPAREN select_stmt
    | DEFAULT VALUES
    ;

/* A source without a column list does not start with a parenthesis: the checker's parser
   reads one as a column list unless SELECT follows it ("INSERT INTO t (VALUES (1))"). */
insert_query: insert_select
    | insert_select query_sort_clause
    | insert_select query_sort_clause sorted_limit
    | insert_select select_limit
    | with_clause select_clause_plain_w
    | with_clause select_clause_plain_w query_sort_clause_w
    | with_clause select_clause_plain_w query_sort_clause_w sorted_limit
    | with_clause select_clause_plain_w select_limit
    ;

insert_select: SELECT opt_distinct target_list where_clause group_clause having_clause
    | SELECT opt_distinct target_list from_clause where_clause group_clause having_clause window_clause
    | values_clause
    | insert_select UNION set_quantifier select_clause
    | insert_select INTERSECT set_quantifier select_clause
    | insert_select EXCEPT set_quantifier select_clause
    ;

opt_on_conflict: ON CONFLICT opt_conf_target DO NOTHING | %empty ;

opt_conf_target: LPAREN column_list RPAREN | %empty ;

returning_clause: RETURNING target_list | %empty ;

update_statement: UPDATE UPDATE_TABLE opt_dml_alias SET set_clause_list opt_from_clause where_clause returning_clause ;

set_clause_list: set_clause
    | set_clause_list COMMA set_clause
    ;

/* A parenthesised source with one value is a plain expression, which PostgreSQL refuses
   for a column list: one value must be written ROW(v) or come from a sub-select. */
set_clause: COLUMN_NAME EQ set_value
    | LPAREN column_list RPAREN EQ LPAREN set_value_list COMMA set_value RPAREN
    | LPAREN column_list RPAREN EQ ROW LPAREN set_value_list RPAREN
    | LPAREN column_list RPAREN EQ subquery
    ;

set_value: a_expr | DEFAULT ;

set_value_list: set_value
    | set_value_list COMMA set_value
    ;

delete_statement: DELETE FROM DELETE_TABLE opt_dml_alias using_clause where_clause returning_clause ;

using_clause: USING from_list | %empty ;

opt_dml_alias: BARE_LABEL
    | AS IDENT
    | %empty
    ;
