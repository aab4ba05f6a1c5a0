package cli

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// usageFilters are the filters of the usage list and summary, sent as the
// API's query parameters of the same names.
var usageFilters = []struct{ flag, usage string }{
	{"project", "project name (default: every project)"},
	{"key", "a virtual key id, or a key name (every key with that name)"},
	{"route", "route model"},
	{"provider", "the provider slug that served the request"},
	{"model", "the model the client sent (a route name or slug/model)"},
	{"since", "from this time on: RFC 3339, a date (2025-03-10, UTC) or a duration ago (24h)"},
	{"until", "before this time: RFC 3339, a date or a duration ago"},
}

// usageCmd is `rolter usage list|summary`.
func (a *app) usageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "usage records of an org, and their sums by key, model, day, ...",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	a.connFlags(cmd, true, false)
	for _, f := range usageFilters {
		cmd.PersistentFlags().String(f.flag, "", f.usage)
	}

	list := &cobra.Command{
		Use:   "list",
		Short: "list usage records, one per request, oldest first",
		Args:  noArgs,
		Example: `  rolter usage list --since 24h
  rolter usage list --key alice --model qwen3 --since 2025-03-10 --until 2025-03-11 -o json`,
	}
	list.Flags().IntVar(&a.limit, "limit", 1000, "print at most this many; a note on stderr says when more exist")
	list.RunE = a.run(false, func(ctx context.Context, c *Client, cmd *cobra.Command, _ []string) error {
		q, err := usageQuery(cmd, time.Now())
		if err != nil {
			return err
		}
		return a.printList(ctx, c, cmd, UsagePath(a.org), q, []column{
			col("ID", "id"), col("TIME", "created_at"), col("PROJECT", "project"), col("KEY_ID", "key_id"),
			col("MODEL", "address"), col("PROVIDER", "provider"), col("TIER", "tier"), col("FALLBACK", "fallback"),
			col("STATUS", "status"), col("CLASS", "class"),
			col("PROMPT", "prompt_tokens"), col("COMPLETION", "completion_tokens"), col("COST_USD", "cost"), col("MS", "latency_ms"),
		})
	})

	summary := &cobra.Command{
		Use:   "summary",
		Short: "sum requests, tokens and cost, in total or grouped",
		Args:  noArgs,
		Long: `Sums the usage records that match the filters: requests, prompt and
completion tokens, cost in USD (empty when none of the group's requests had
a price) and the requests served without a price. The sums are computed by
the gateway's database.`,
		Example: `  rolter usage summary --key alice --since 2025-03-10 --until 2025-03-11
  rolter usage summary --group-by key,day --since 168h
  rolter usage summary --group-by model -o csv > usage.csv`,
	}
	summary.Flags().String("group-by", "", "comma-separated: key, project, route, provider, model and one of day or hour")
	summary.Flags().Int("limit", 0, "at most this many groups (default the API's, 1000); more is refused as too_many_groups")
	summary.Flags().Lookup("limit").DefValue = "1000"
	summary.RunE = a.run(true, func(ctx context.Context, c *Client, cmd *cobra.Command, _ []string) error {
		q, err := usageQuery(cmd, time.Now())
		if err != nil {
			return err
		}
		if g, _ := cmd.Flags().GetString("group-by"); g != "" {
			q.Set("group_by", g)
		}
		if cmd.Flags().Changed("limit") {
			n, _ := cmd.Flags().GetInt("limit")
			q.Set("limit", strconv.Itoa(n))
		}
		if a.output == formatCSV {
			q.Set("format", "csv")
			b, err := c.DoRaw(ctx, "GET", UsageSummaryPath(a.org), q, nil)
			if err != nil {
				return err
			}
			_, err = a.env.Stdout.Write(b)
			return err
		}
		raw, err := Get[json.RawMessage](ctx, c, UsageSummaryPath(a.org), q)
		if err != nil {
			return err
		}
		if a.output != formatTable {
			return writeObject(a.env.Stdout, a.output, raw)
		}
		return writeSummary(a.env.Stdout, raw)
	})
	cmd.PersistentFlags().Lookup("output").Usage = "output format: table, json or yaml; csv for summary"
	cmd.AddCommand(list, summary)
	return cmd
}

// usageQuery reads the filter flags that were given; an empty filter is
// refused by the API, so a flag not given sends nothing.
func usageQuery(cmd *cobra.Command, now time.Time) (url.Values, error) {
	q := url.Values{}
	for _, f := range usageFilters {
		if !cmd.Flags().Changed(f.flag) {
			continue
		}
		v, _ := cmd.Flags().GetString(f.flag)
		if f.flag == "since" || f.flag == "until" {
			v = relativeTime(v, now)
		}
		q.Set(f.flag, v)
	}
	return q, nil
}

// relativeTime turns a duration ("24h") into the time that long before
// now; anything else goes to the API as written, which checks it.
func relativeTime(v string, now time.Time) string {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return v
	}
	return now.Add(-d).UTC().Format(time.RFC3339)
}

// writeSummary prints a usage summary as a table: the grouped dimensions,
// then the sums.
func writeSummary(w interface{ Write([]byte) (int, error) }, raw json.RawMessage) error {
	var s struct {
		Currency string            `json:"currency"`
		GroupBy  []string          `json:"group_by"`
		Data     []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return &ConnError{Msg: "unexpected usage summary", Err: err}
	}
	var cols []column
	for _, d := range s.GroupBy {
		if d == "key" {
			cols = append(cols, col("KEY_ID", "key_id"))
		}
		cols = append(cols, col(strings.ToUpper(d), d))
	}
	cols = append(cols, col("REQUESTS", "requests"), col("PROMPT_TOKENS", "prompt_tokens"),
		col("COMPLETION_TOKENS", "completion_tokens"), col("COST_"+s.Currency, "cost"), col("UNPRICED", "unpriced_requests"))
	return writeTable(w, s.Data, cols)
}
