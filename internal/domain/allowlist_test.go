package domain

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParseAllowListCanonical(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", []string{}},
		{"  \n ", []string{}},
		{"10.0.0.1", []string{"10.0.0.1"}},
		{"10.0.0.1/32", []string{"10.0.0.1"}},
		{"10.0.0.0/8, 192.168.1.0/24", []string{"10.0.0.0/8", "192.168.1.0/24"}},
		{"10.0.0.1,10.0.0.1 10.0.0.1/32", []string{"10.0.0.1"}},
		{"2001:DB8:0:0::1", []string{"2001:db8::1"}},
		{"2001:db8::/32\n::1", []string{"2001:db8::/32", "::1"}},
		{"::ffff:10.0.0.1", []string{"10.0.0.1"}},
		{"::ffff:10.0.0.0/104", []string{"10.0.0.0/8"}},
		{"1.2.3.4,,5.6.7.8", []string{"1.2.3.4", "5.6.7.8"}},
		{"0.0.0.0/0", []string{"0.0.0.0/0"}},
	} {
		l, err := ParseAllowList(tc.in)
		if err != nil {
			t.Errorf("ParseAllowList(%q): %v", tc.in, err)
			continue
		}
		if got := l.Strings(); !slices.Equal(got, tc.want) {
			t.Errorf("ParseAllowList(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseAllowListRefuses(t *testing.T) {
	var many []string
	for i := range MaxAllowedIPs + 1 {
		many = append(many, fmt.Sprintf("10.0.0.%d", i))
	}
	for _, tc := range []struct{ in, msg string }{
		{",", "no address"},
		{"10.0.0.1/8", "did you mean 10.0.0.0/8?"},
		{"10.0.0.0/33", "not an IP address"},
		{"10.0.0", "not an IP address"},
		{"example.com", "not an IP address"},
		{"fe80::1%eth0", "zone"},
		{"1.2.3.4/-1", "not an IP address"},
		{strings.Join(many, ","), "at most 50"},
	} {
		_, err := ParseAllowList(tc.in)
		var de *Error
		if !errors.As(err, &de) || de.Code != CodeInvalidValue || len(de.Fields) != 1 || de.Fields[0].Field != "allowed_ips" {
			t.Errorf("ParseAllowList(%.40q) = %v, want invalid_value on allowed_ips", tc.in, err)
			continue
		}
		if !strings.Contains(de.Message, tc.msg) {
			t.Errorf("ParseAllowList(%.40q): message %q does not say %q", tc.in, de.Message, tc.msg)
		}
	}
	if _, err := ParseAllowList(strings.Join(many[:MaxAllowedIPs], ",")); err != nil {
		t.Errorf("%d entries: %v", MaxAllowedIPs, err)
	}
}

func TestAllowListAllows(t *testing.T) {
	l, err := ParseAllowList("127.0.0.2, 10.0.0.0/8, 2001:db8::/32")
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"127.0.0.2":        true,
		"127.0.0.1":        false,
		"::ffff:127.0.0.2": true, // IPv4-mapped matches its IPv4 entry
		"::ffff:127.0.0.1": false,
		"10.200.3.4":       true,
		"11.0.0.1":         false,
		"2001:db8:1::5":    true,
		"2001:db9::1":      false,
		"::1":              false,
		"not an address":   false,
		"":                 false,
		"2001:db8::1%eth0": true,
	} {
		if got := l.AllowsAddr(addr); got != want {
			t.Errorf("AllowsAddr(%q) = %v, want %v", addr, got, want)
		}
	}
	mapped, _ := ParseAllowList("::ffff:127.0.0.0/104")
	if !mapped.AllowsAddr("127.9.9.9") {
		t.Error("a mapped entry does not match its IPv4 address")
	}
	var any AllowList
	if !any.AllowsAddr("garbage") || !any.AllowsAddr("") {
		t.Error("an empty list refuses an address")
	}
}
