//go:build !unix

package natsauth

import iofs "io/fs"

// oNoFollow: no such open flag here; WriteFile and ReadFiles still refuse a
// symbolic link they find before opening.
const oNoFollow = 0

// fileOwner: file ownership is not a uid here, so CheckDir does not check it.
func fileOwner(iofs.FileInfo) (uid int, ok bool) { return 0, false }
