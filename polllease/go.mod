module github.com/distlock/distlock/polllease

go 1.24

require github.com/distlock/distlock/core v0.0.0-00010101000000-000000000000

replace github.com/distlock/distlock/core => ../core
