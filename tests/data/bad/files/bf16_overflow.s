.data
X: .bf16 3.4e38
