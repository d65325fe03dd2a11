int one;
int two;
