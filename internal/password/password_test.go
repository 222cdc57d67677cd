package password

import (
	"strings"
	"testing"
)

func TestHashAndVerify(t *testing.T) {
	h, err := Hash("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash %q", h)
	}
	if ok, err := Verify(h, "correct horse battery staple"); !ok || err != nil {
		t.Fatalf("right password: %v %v", ok, err)
	}
	if ok, _ := Verify(h, "correct horse battery stapl"); ok {
		t.Fatal("wrong password verified")
	}
	h2, _ := Hash("correct horse battery staple")
	if h == h2 {
		t.Fatal("two hashes of one password are equal: salt not random")
	}
	for _, bad := range []string{"", "$argon2id$", strings.Replace(h, "argon2id", "argon2i", 1),
		strings.Replace(h, "m=19456", "m=99999999", 1), strings.Replace(h, "t=2", "t=99", 1), h[:len(h)-30]} {
		if ok, err := Verify(bad, "correct horse battery staple"); ok || err == nil {
			t.Errorf("Verify(%q) = %v, %v", bad, ok, err)
		}
	}
	DummyVerify("anything")
}

func TestCheck(t *testing.T) {
	for pw, ok := range map[string]bool{
		"1234567": false, "12345678": true, "éééééééé": true, strings.Repeat("a", 1024): true,
		strings.Repeat("a", 1025): false, "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8": false,
	} {
		if got := Check(pw) == nil; got != ok {
			t.Errorf("Check(%q) ok = %v, want %v", pw, got, ok)
		}
	}
}
