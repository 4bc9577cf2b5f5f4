package fastcodec

import "time"

// parseUTC reads the one time shape events.Encode writes (RFC 3339 in UTC with
// "Z" and at most nine fraction digits, as time.RFC3339Nano formats it), or
// returns false for any other text, which time.Parse then judges. Every
// event's time is parsed on every load and replay, and time.Parse's
// general layout walk was a tenth of decoding an event. Whatever it
// accepts, time.Parse reads to the same instant (FuzzParseUTCAgrees).
func parseUTC(s string) (time.Time, bool) {
	// 2006-01-02T15:04:05[.fraction]Z
	const fixed = len("2006-01-02T15:04:05")
	if len(s) < fixed+1 || s[len(s)-1] != 'Z' ||
		s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	hour, ok4 := digits(s[11:13])
	minute, ok5 := digits(s[14:16])
	sec, ok6 := digits(s[17:19])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 ||
		month < 1 || month > 12 || day < 1 || day > daysIn(time.Month(month), year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := s[fixed : len(s)-1]; frac != "" {
		if len(frac) < 2 || len(frac) > 10 || frac[0] != '.' {
			return time.Time{}, false
		}
		n, ok := digits(frac[1:])
		if !ok {
			return time.Time{}, false
		}
		for range 10 - len(frac) {
			n *= 10
		}
		nsec = n
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC), true
}

// digits reads s, made of ASCII digits only, as a decimal number.
func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// daysIn is the number of days of month m in year.
func daysIn(m time.Month, year int) int {
	// The day before the first of the next month.
	return time.Date(year, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}
